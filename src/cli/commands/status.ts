// `berth status [RUN] [--json] [--watch]`: one run in detail or all runs as a table; --watch
// redraws until Ctrl-C (as `watch` and `kubectl get -w` do: a run that ended may be resumed, a new
// one submitted), and exits 0 then; `submit --wait` is the command that waits for a run to settle.
import { setTimeout as sleep } from 'node:timers/promises';
import { connectToDaemon, type ControlClient } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { POLL_MS } from '../follow.js';
import { printJson, type Io } from '../io.js';
import { LiveView } from '../live-view.js';
import { runDetail, runsTable } from '../render.js';
import { abortOnSignals } from '../signals.js';

export interface StatusOptions {
  json?: boolean;
  watch?: boolean;
}

export async function statusCommand(runId: string | undefined, options: StatusOptions, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const client = connectToDaemon(env);
  return runId === undefined ? allRuns(client, options, io) : oneRun(client, runId, options, io);
}

async function oneRun(client: ControlClient, id: string, options: StatusOptions, io: Io): Promise<number> {
  if (!options.watch) {
    const run = await client.getRun(id);
    if (options.json) printJson(io, run);
    else runDetail(run, Date.now()).forEach((l) => io.out(l));
    return EXIT.ok;
  }
  return watch(
    io,
    options,
    () => client.getRun(id),
    (run) => runDetail(run, Date.now()),
  );
}

async function allRuns(client: ControlClient, options: StatusOptions, io: Io): Promise<number> {
  // On a terminal the table fits its width (a live frame's line of exactly `columns` is cut); piped, every column shows.
  const width = io.live ? io.columns - 1 : Infinity;
  if (!options.watch) {
    const runs = await client.listRuns();
    if (options.json) printJson(io, runs);
    else runsTable(runs, Date.now(), width).forEach((l) => io.out(l));
    return EXIT.ok;
  }
  return watch(
    io,
    options,
    () => client.listRuns(),
    (runs) => runsTable(runs, Date.now(), width),
  );
}

/** Redraws what `read` gives every POLL_MS until Ctrl-C; --json prints the last reading then. */
async function watch<T>(io: Io, options: StatusOptions, read: () => Promise<T>, render: (value: T) => string[]): Promise<number> {
  const view = options.json ? undefined : new LiveView(io);
  const { signal, dispose } = abortOnSignals();
  try {
    for (;;) {
      const value = await read();
      // The key leaves out nothing that changes on its own: non-TTY output prints once per change.
      view?.update(render(value), JSON.stringify(value));
      await sleep(POLL_MS, undefined, { signal }).catch(() => undefined);
      if (signal.aborted) {
        if (options.json) printJson(io, value);
        return EXIT.ok;
      }
    }
  } finally {
    view?.done();
    dispose();
  }
}
