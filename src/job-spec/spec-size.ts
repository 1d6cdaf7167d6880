// The one size limit of a job spec, shared by `berth validate`, `berth submit` (which reads the file)
// and the daemon (which reads the request body), so that a spec one accepts the others accept too.
// It is counted on the JSON the CLI sends: the spec re-serialised without spaces.

/** Largest job spec, in bytes of compact JSON (1 MiB). */
export const MAX_SPEC_BYTES = 1 << 20;

/** Bytes of a parsed spec as it travels to the daemon. */
export function specBytes(spec: unknown): number {
  return Buffer.byteLength(JSON.stringify(spec), 'utf8');
}
