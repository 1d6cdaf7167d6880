// One section of the `npm run bench` report. Each part (simulator, client, berth vs baseline) returns
// one; bench/main.ts prints them as tables and writes them to bench/results/latest.{json,md}.
export interface BenchRow {
  metric: string;
  /** Measured value, already formatted with its unit (e.g. "2,480 req/s", "0.21×"). */
  value: string;
  /** The goal from the issue, when there is one (e.g. ">= 2,000 req/s"). */
  target?: string;
  /** Whether the target was met; undefined when there is no target. */
  met?: boolean;
  /** How it was measured, or why a target was missed. */
  note?: string;
}

export interface BenchSection {
  title: string;
  rows: BenchRow[];
}

/** Median of a sample (sorted copy); NaN for an empty sample. */
export function median(values: number[]): number {
  return quantile(values, 0.5);
}

export function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}
