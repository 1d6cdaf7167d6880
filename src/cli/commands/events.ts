// `berth events RUN [--json] [--follow]`: the run's event log, oldest first, however long (it is
// read page by page). --follow keeps printing new events until the run has ended (with --json: one
// JSON event per line).
import { setTimeout as sleep } from 'node:timers/promises';
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { POLL_MS } from '../follow.js';
import { printJson, type Io } from '../io.js';
import { eventLine } from '../render.js';
import { isEndState } from '../../wire/run-states.js';
import type { RunEvent } from '../../wire/control-api.js';
import { abortOnSignals } from '../signals.js';

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
    let last: number | undefined;
    while (!signal.aborted) {
      // The state is read before the events: once it has ended, this batch holds the last of them.
      const ended = isEndState((await client.getRun(runId)).state);
      const events = await client.allEvents(runId, last);
      events.forEach(print);
      last = events.at(-1)?.id ?? last;
      if (ended) return EXIT.ok;
      await sleep(POLL_MS, undefined, { signal }).catch(() => undefined);
    }
    return EXIT.interrupted;
  } finally {
    dispose();
  }
}
