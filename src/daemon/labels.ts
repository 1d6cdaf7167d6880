// Instance labels name the store, run and attempt that made an instance, so that after a crash the
// daemon can find its instances in the service's list, and two daemons on one account never take
// each other's (SPEC section 6).
const PREFIX = 'berth:';

export function attemptLabel(storeId: string, runId: string, n: number): string {
  return `${PREFIX}${storeId}:${runId}:${n}`;
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
