// Instance labels name the store, run and attempt that made an instance, so that after a crash the
// daemon can find its instances in the service's list, and two daemons on one account never take
// each other's (docs/design.md).
import { CREATE_INPUT_LIMITS } from '../../job-spec/create-input-limits.js';

const PREFIX = 'berth:';

/**
 * `berth:<store id>:<run id>:<attempt>`: 8 + 12 characters of ids and the attempt number, far
 * under the service's 256-character label limit (checked here so that no create is ever refused
 * for its label).
 */
export function attemptLabel(storeId: string, runId: string, n: number): string {
  const label = `${PREFIX}${storeId}:${runId}:${n}`;
  if (label.length > CREATE_INPUT_LIMITS.labelMaxChars) {
    throw new RangeError(`instance label of ${label.length} characters exceeds the service's ${CREATE_INPUT_LIMITS.labelMaxChars}`);
  }
  return label;
}

export interface ParsedLabel {
  storeId: string;
  runId: string;
  n: number;
}

/** The parts of a berth label, or null for any other label (another tool's, or none). */
export function parseLabel(label: string | null | undefined): ParsedLabel | null {
  if (!label || !label.startsWith(PREFIX)) return null;
  const parts = label.slice(PREFIX.length).split(':');
  if (parts.length !== 3) return null;
  const n = Number(parts[2]);
  if (!parts[0] || !parts[1] || !Number.isInteger(n) || n < 1) return null;
  return { storeId: parts[0], runId: parts[1], n };
}
