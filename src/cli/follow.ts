// Following a run as it changes: polls the control API until the run satisfies `until`, and shows
// people where it stands (a live status line, plus one line for each attempt that ends).
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError } from '../errors.js';
import type { ControlClient } from './control-client.js';
import { abortOnSignals } from './signals.js';
import type { Io } from './io.js';
import { LiveView } from './live-view.js';
import { attemptEndedLine, attemptReadyLine, progressKey, progressLine } from './render.js';
import type { Run } from '../wire/control-api.js';
import { attemptIsLive } from '../wire/run-states.js';

/** The daemon is local: a quarter second feels live and costs nothing. */
export const POLL_MS = 250;

interface FollowOptions {
  until(run: Run): boolean;
  /** Called with every fetched run (the live display, or nothing for --json). */
  onRun?: ((run: Run) => void) | undefined;
  /** Aborting stops following (the run itself carries on in the daemon). */
  signal?: AbortSignal | undefined;
}

/** Resolves with the first fetched run that satisfies `until`; throws `aborted` when the signal fires. */
async function followRun(client: ControlClient, id: string, options: FollowOptions): Promise<Run> {
  for (;;) {
    const run = await client.getRun(id);
    options.onRun?.(run);
    if (options.until(run)) return run;
    try {
      await sleep(POLL_MS, undefined, { signal: options.signal });
    } catch {
      throw new BerthError('aborted', `Stopped following run ${id}; it carries on in the daemon (see \`berth status ${id}\`).`);
    }
  }
}

/**
 * The people's view of a followed run: attempt outcomes as they happen, under a live status line.
 * Attempts that had already ended in `seen` (what the user was last shown) are not told again.
 */
function progressDisplay(io: Io, seen?: Run): { onRun(run: Run): void; log(line: string): void; done(): void } {
  const view = new LiveView(io);
  const reported = new Set<number>(seen?.attempts.filter((a) => !attemptIsLive(a)).map((a) => a.n));
  // Readiness told once per time it was reached (a rebid restarts the check).
  let readyShown = seen?.instance?.ready?.at;
  return {
    onRun(run) {
      for (const a of run.attempts) {
        if (attemptIsLive(a) || reported.has(a.n)) continue;
        reported.add(a.n);
        view.log(attemptEndedLine(a));
      }
      const ready = run.instance?.ready;
      if (ready && ready.at !== readyShown) {
        readyShown = ready.at;
        const line = attemptReadyLine(run);
        if (line) view.log(line);
      }
      view.update([progressLine(run, Date.now())], progressKey(run));
    },
    log: (line) => view.log(line),
    done: () => view.done(),
  };
}

export interface WatchOptions {
  /** --json: follow without showing anything. */
  quiet?: boolean | undefined;
  /** The caller's own stop signal; without one, the first SIGINT/SIGTERM stops following (exit 130). */
  signal?: AbortSignal;
  /** Called with every fetched run and a way to print a line that stays, above the live status line (not with `quiet`). */
  onRun?: (run: Run, log: (line: string) => void) => void;
}

/** Follows a run from `run` (as last shown) until `until`, showing progress; the run itself carries on if stopped. */
export async function watchRun(
  client: ControlClient,
  run: Run,
  io: Io,
  until: (run: Run) => boolean,
  options: WatchOptions = {},
): Promise<Run> {
  const display = options.quiet ? undefined : progressDisplay(io, run);
  const signals = options.signal ? undefined : abortOnSignals();
  const onRun =
    display &&
    ((r: Run) => {
      options.onRun?.(r, display.log);
      display.onRun(r);
    });
  try {
    return await followRun(client, run.id, { until, signal: options.signal ?? signals?.signal, onRun });
  } finally {
    display?.done();
    signals?.dispose();
  }
}
