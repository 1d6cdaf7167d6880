// What the store costs on each backend, one call after another as the daemon's one thread makes
// them: a read the daemon makes constantly (runs.get), a progress save as the run driver commits it
// (saveProgress + an event, in one transaction), and submissions and transitions per second. Used
// by ./store-calls.ts (its own report) and by the cluster part (./cluster.ts).
import type { Store } from '../src/store/index.js';

export interface Timing {
  median: number;
  p99: number;
}

export interface StoreFigures {
  read: Timing;
  save: Timing;
  /** A run and its first event, one transaction each, per second. */
  submissionsPerS: number;
  /** A progress save and an event, one transaction each, per second. */
  transitionsPerS: number;
}

/** ms per call of `fn`, after 100 calls of warm-up. */
export function timed(fn: (i: number) => void, rounds: number): Timing {
  for (let i = 0; i < 100; i++) fn(-1 - i);
  const ms: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    fn(i);
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  return { median: ms[Math.floor(rounds / 2)]!, p99: ms[Math.floor(rounds * 0.99)]! };
}

/** `reads` runs.get calls, 500 progress saves, then 1,000 submissions and 1,000 transitions. */
export function measureStore(store: Store, reads: number): StoreFigures {
  const progress = { relaxLevel: 0, attempt: 1, error: null, snapshotJson: '{"value":"running"}', machineVersion: 1 };
  store.transaction(() => store.runs.insert({ id: 'bench', name: 'bench', specJson: '{}', createdAt: 1 }));
  const read = timed(() => store.runs.get('bench'), reads);
  const save = timed(
    (i) =>
      store.transaction(() => {
        store.runs.saveProgress('bench', { ...progress, state: 'running', at: 1_000 + i });
        store.events.append({ runId: 'bench', at: 1_000 + i, type: 'bench', message: 'a step' });
      }),
    500,
  );
  const rate = (n: number, fn: (i: number) => void) => {
    const t = performance.now();
    for (let i = 0; i < n; i++) fn(i);
    return Math.round(n / ((performance.now() - t) / 1000));
  };
  const submissionsPerS = rate(1_000, (i) =>
    store.transaction(() => {
      store.runs.insert({ id: `s${i}`, name: 'bench', specJson: '{}', createdAt: i });
      store.events.append({ runId: `s${i}`, at: i, type: 'run.submitted', message: 'submitted' });
    }),
  );
  const transitionsPerS = rate(1_000, (i) =>
    store.transaction(() => {
      store.runs.saveProgress(`s${i}`, { ...progress, state: 'searching', at: 5_000 + i });
      store.events.append({ runId: `s${i}`, at: 5_000 + i, type: 'bench', message: 'a step' });
    }),
  );
  return { read, save, submissionsPerS, transitionsPerS };
}
