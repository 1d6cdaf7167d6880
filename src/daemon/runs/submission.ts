// What a submission is given: its run id, and the hash that tells a repeated submission (same
// Idempotency-Key, same spec: the same run) from a key reused for another spec (a conflict).
import { createHash, randomBytes } from 'node:crypto';
import { BerthError } from '../../errors.js';

/** The same Idempotency-Key sent with another spec: nothing is stored. */
export class IdempotencyConflictError extends BerthError {
  constructor(
    readonly key: string,
    readonly runId: string,
  ) {
    super(
      'control_rejected',
      `Idempotency-Key "${key}" already belongs to run ${runId}, which was submitted with a different job spec: resubmit that spec to get run ${runId}, or use a new key.`,
    );
  }
}

/** JSON with every object's keys sorted, so that one spec always hashes alike. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** sha256 of the spec as submitted, in canonical JSON: one spec always hashes alike. */
export function specHash(parsed: unknown): string {
  return createHash('sha256').update(canonicalJson(parsed)).digest('hex');
}

export function newRunId(): string {
  // 12 characters of base32: short enough for labels and typing, 60 bits of randomness.
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const bytes = randomBytes(12);
  let id = '';
  for (const b of bytes) id += alphabet[b & 31];
  return id;
}
