// `berth events RUN [--json] [--follow]`: the run's event log, oldest first, however long (it is
// read page by page). --follow prints the log and then each event as it is stored, from the
// daemon's event stream, until the run has ended (with --json: one JSON event per line).
import { setTimeout as sleep } from 'node:timers/promises';
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { printJson, type Io } from '../io.js';
import { eventLine } from '../render.js';
import type { RunEvent } from '../../wire/control-api.js';
import { abortOnSignals } from '../signals.js';

/** Wait before a cut stream is opened again. */
const RECONNECT_MS = 500;

export interface EventsOptions {
  json?: boolean;
  follow?: boolean;
}

export async function eventsCommand(runId: string, options: EventsOptions, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const client = connectToDaemon(env);
  if (!options.follow) {
    const events = await client.allEvents(runId);
    if (options.json) printJson(io, events);
    else if (events.length === 0) io.out(`Run ${runId} has no events yet.`);
    else events.forEach((e) => io.out(eventLine(e)));
    return EXIT.ok;
  }

  const print = (e: RunEvent) => io.out(options.json ? JSON.stringify(e) : eventLine(e));
  const { signal, dispose } = abortOnSignals();
  try {
    // The daemon's event stream (GET /v1/events/stream): each event as it is stored. A stream cut
    // short (a daemon restarting) is resumed after the last event printed, so none is shown twice
    // or missed; a daemon that is gone for good ends this with "not reachable" (exit 3).
    let last: number | undefined;
    for (;;) {
      const got = await client.streamEvents(
        runId,
        last,
        ({ run_id: _run, ...e }) => {
          print(e);
          last = e.id;
        },
        signal,
      );
      if (got === 'end') return EXIT.ok;
      if (got === 'aborted' || signal.aborted) return EXIT.interrupted;
      await sleep(RECONNECT_MS, undefined, { signal }).catch(() => undefined);
      if (signal.aborted) return EXIT.interrupted;
    }
  } finally {
    dispose();
  }
}
