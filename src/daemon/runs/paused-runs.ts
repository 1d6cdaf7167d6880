// Runs paused because their driver could not write the store (disk full, berth.db locked by another
// program), and the probe that lets them go on: idle until a run pauses, then a probe 1 s later and,
// while the store still refuses, again after 2 s, doubling up to 30 s. Once the store takes a write,
// every paused run resumes from its stored row, as a restarted daemon would resume it.
import type { Clock } from '../../clock.js';
import { StoreError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { PeriodicLoop } from '../../periodic-loop.js';
import type { RunRow, Store } from '../../store/index.js';

/** Writes a paused run waits for before it is tried again: from 1 s, doubling, at most 30 s. */
const STORE_RETRY_MS = { min: 1_000, max: 30_000 };

export interface PausedRunsDeps {
  store: Pick<Store, 'canWrite' | 'runs'>;
  clock: Clock;
  log: Logger;
  /** Lets one paused run go on from its stored row (its driver's `resume`). */
  resume(runId: string, row: RunRow): void;
}

export class PausedRuns {
  private readonly paused = new Set<string>();
  private readonly probe: PeriodicLoop;
  private stopped = false;

  constructor(private readonly deps: PausedRunsDeps) {
    this.probe = new PeriodicLoop({
      clock: deps.clock,
      intervalMs: null,
      // After a refused probe: 2 s, then doubling up to 30 s (1 s after the pause comes first).
      backoff: { firstMs: 2 * STORE_RETRY_MS.min, maxMs: STORE_RETRY_MS.max },
      run: () => this.resumeAll(),
      // A paused run said why when it paused; a refused probe is only waited out.
      onError: () => undefined,
    });
  }

  /** A run's driver paused it. The first run to pause arms the probe; the others wait for it (a back-off armed stands). */
  add(runId: string): void {
    if (this.paused.size === 0) this.probe.soon(STORE_RETRY_MS.min);
    this.paused.add(runId);
  }

  /** The run ended or is driven elsewhere now. */
  delete(runId: string): void {
    this.paused.delete(runId);
  }

  stop(): void {
    this.stopped = true;
    this.probe.stop();
  }

  /** One probe of the store: once it takes a write, the paused runs go on from their stored rows. */
  private resumeAll(): void {
    if (this.stopped || this.paused.size === 0) return;
    if (!this.deps.store.canWrite()) throw new StoreError('berth.db takes no writes yet', undefined, true);
    const ids = [...this.paused];
    this.paused.clear();
    this.deps.log.info({ runs: ids.length }, 'the store takes writes again; paused runs go on');
    for (const id of ids) {
      const row = this.deps.store.runs.get(id);
      if (row) this.deps.resume(id, row);
    }
  }
}
