// The service's limits on what a create may carry, from its published description of
// `PUT /api/v0/asks/{id}/` (create_instance.yaml: `x-input-validation`, the `price` bounds, and the
// 4048-character onstart limit of the seed and the yaml's header). The service refuses a create
// that breaks one of them, and would refuse it on every offer, so a spec that would break one is
// refused at submit instead of failing every attempt of the run.
//
// Lengths are counted in UTF-8 bytes: never fewer than characters, however the service counts
// them, so what passes here can never be over its limit.

export const CREATE_INPUT_LIMITS = {
  /** `image`: max_length 1024. */
  imageMaxChars: 1024,
  /** `label`: max_length 256 (berth builds the label: see src/daemon/instances/labels.ts). */
  labelMaxChars: 256,
  /** `env`: max_length 256, each value. */
  envValueMaxChars: 256,
  /** `env`: max_total_length 32768, counted as the Docker flags the service documents (`-e NAME=value ...`). */
  envTotalMaxChars: 32_768,
  /** `disk`: min 8.0 GB. */
  diskMinGb: 8,
  /** `onstart`: 4048 characters; longer scripts are sent gzip+base64-compressed (./onstart.ts). */
  onstartMaxChars: 4048,
  /**
   * `args` + `args_str` + `onstart`: 4096 characters together (create_instance.yaml; the service
   * notes "Added 2026-12-01"). berth sends neither `args` nor `args_str` (its instances run the
   * image's entrypoint under the ssh runtype), so the sum is its `onstart`, which the 4048 above
   * already holds under it: a spec passes at submit only with an `onstart` that fits both.
   */
  createTextTotalMaxChars: 4096,
  /** `price` (bid, $/h): min 0.001, max 128.0. */
  bidPriceMin: 0.001,
  bidPriceMax: 128,
} as const;

/** The size the service's limits are checked against. */
export function sizeOf(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** The length of `env` as the service counts it against envTotalMaxChars: `-e A=1 -e B=2`. */
export function envTotalSize(env: Record<string, string>): number {
  const flags = Object.entries(env).map(([name, value]) => `-e ${name}=${value}`);
  return sizeOf(flags.join(' '));
}
