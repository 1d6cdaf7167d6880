// `berth status [RUN] [--json] [--watch]`: one run in detail or all runs as a table; --watch
// redraws until the run (or every run) is running or has ended.
import { setTimeout as sleep } from 'node:timers/promises';
import { connectToDaemon, type ControlClient } from '../control-client.js';
import { EXIT, exitCodeForRun } from '../exit-codes.js';
import { followRun, POLL_MS } from '../follow.js';
import { printJson, type Io } from '../io.js';
import { LiveView } from '../live-view.js';
import { runDetail, runsTable } from '../render.js';
import { isSettled } from '../../wire/run-states.js';
import type { Run } from '../../wire/control-api.js';
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
  const view = options.json ? undefined : new LiveView(io);
  const { signal, dispose } = abortOnSignals();
  try {
    const run = await followRun(client, id, {
      until: (r) => isSettled(r.state),
      signal,
      // The key leaves out nothing that changes on its own: non-TTY output prints once per change.
      onRun: (r) => view?.update(runDetail(r, Date.now()), JSON.stringify(r)),
    });
    if (options.json) printJson(io, run);
    return exitCodeForRun(run);
  } finally {
    view?.done();
    dispose();
  }
}

async function allRuns(client: ControlClient, options: StatusOptions, io: Io): Promise<number> {
  // On a terminal the table fits its width (a live frame's line of exactly `columns` is cut); piped, every column shows.
  const width = io.live ? io.columns - 1 : Infinity;
  const show = (runs: Run[]) => (options.json ? printJson(io, runs) : runsTable(runs, Date.now(), width).forEach((l) => io.out(l)));
  if (!options.watch) {
    show(await client.listRuns());
    return EXIT.ok;
  }
  const view = options.json ? undefined : new LiveView(io);
  const { signal, dispose } = abortOnSignals();
  try {
    for (;;) {
      const runs = await client.listRuns();
      view?.update(runsTable(runs, Date.now(), width), JSON.stringify(runs));
      if (runs.every((r) => isSettled(r.state)) || signal.aborted) {
        if (options.json) printJson(io, runs);
        return signal.aborted ? EXIT.interrupted : EXIT.ok;
      }
      await sleep(POLL_MS, undefined, { signal }).catch(() => undefined);
    }
  } finally {
    view?.done();
    dispose();
  }
}
