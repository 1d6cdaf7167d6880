// `berth logs RUN [--tail N] [--follow]`: the run's container log (a task's output), live from its
// instance through the service's logs endpoint while it holds one, else the lines kept with its last
// attempt; every secret scrubbed by the daemon. Printed through Io, which shows terminal escapes
// as text: a task's output is data, never commands for the user's terminal.
//
// --follow, while the daemon streams the task over SSH (issue #39): the run's event stream with its
// output (`output=1`), opened before the first read, so every line kept after that read comes by the
// stream and is printed as it comes (each batch once, by its byte offset: ../log-follow.ts). The
// log is read again every FOLLOW_EVERY_MS all the same (from the store while streamed: no call to the
// service), and, when the daemon does not stream the task (no SSH, the follow dropped, another
// daemon of a shared store follows it), that read is the follow: one logs request to the service
// (rate group `other`) each, so the pace is slow on purpose, printing what is new until the run ends.
import { countText } from '../../count-text.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError } from '../../errors.js';
import { isEndState } from '../../wire/run-states.js';
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import type { Io } from '../io.js';
import { linesOf, newLinesAcrossSources, StreamedLog } from '../log-follow.js';
import type { StreamOutput } from '../../wire/control-api.js';
import { endedWords } from '../render.js';

const FOLLOW_EVERY_MS = 5_000;

export async function logsCommand(
  runId: string,
  options: { tail: string; follow?: boolean },
  io: Io,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const tail = Number(options.tail);
  if (!Number.isInteger(tail) || tail < 1 || tail > 5000)
    throw new BerthError('bad_request', '--tail must be a whole number from 1 to 5000.');
  const client = connectToDaemon(env);
  if (options.follow) return followLogs(client, runId, tail, io);
  const first = await client.logs(runId, tail);
  const printed = linesOf(first.text);
  if (printed.length === 0) io.err(await noLogSentence(client, runId, first.instance_id));
  if (first.cut) io.err(`(earlier lines left out: showing the last ${countText(printed.length, 'line')} berth could read of a longer log)`);
  for (const line of printed) io.out(line);
  return EXIT.ok;
}

/** Batches held while no read has said where the stream stands (the lines they hold may be in it). */
const HELD_MAX = 64;

async function followLogs(client: ReturnType<typeof connectToDaemon>, runId: string, tail: number, io: Io): Promise<number> {
  let printed: string[] = [];
  const print = (lines: readonly string[]) => {
    for (const line of lines) io.out(line);
    printed = [...printed, ...lines].slice(-tail);
  };
  const gapNote = () => io.err('(some lines were left out: the task printed faster than berth streams; `berth logs` shows what was kept)');
  let streamed: StreamedLog | null = null;
  let held: StreamOutput[] = [];
  const take = (o: StreamOutput) => {
    const { lines, gap } = streamed!.take(o);
    if (gap) gapNote();
    print(lines);
  };
  const stop = new AbortController();
  let opened!: () => void;
  const open = new Promise<void>((resolve) => (opened = resolve));
  let streamOver = false;
  const stream = client
    .streamEvents(
      runId,
      undefined,
      () => undefined,
      stop.signal,
      // Until a read says where the stream stands, batches wait (the last HELD_MAX).
      { onOutput: (o) => (streamed ? take(o) : (held = [...held, o].slice(-HELD_MAX))), onOpen: () => opened() },
    )
    // Without the stream (an older daemon, a dropped connection), the reads alone follow.
    .catch(() => 'closed' as const)
    .then((how) => {
      streamOver = true;
      return how;
    });
  try {
    await Promise.race([open, stream]);
    for (let first = true; ; first = false) {
      // The state first: a run that has ended still gets one last read, so its final lines show.
      const ended = isEndState((await client.getRun(runId)).state);
      const read = await client.logs(runId, tail);
      const at = read.stream ?? null;
      if (first && read.cut)
        io.err(
          `(earlier lines left out: showing the last ${countText(linesOf(read.text).length, 'line')} berth could read of a longer log)`,
        );
      if (at === null || streamed === null || at.n !== streamed.attempt) {
        // Not streamed, or streamed from this read on: the read is what is new.
        // A read is the container's log (sshd's lines in it) or the follower's kept out-file, and
        // which one can change between two reads: the overlap is sought across sources.
        const { lines, gap } = newLinesAcrossSources(printed, linesOf(read.text));
        if (gap) io.err('(more lines were written than --tail holds between two reads: some may be missing)');
        print(lines);
        streamed = at && !streamOver ? new StreamedLog(at) : null;
        if (streamed) for (const o of held) take(o);
        held = [];
      }
      if (ended) return EXIT.ok;
      // Streamed: read again once the run's stream ends (the run ended) or after FOLLOW_EVERY_MS.
      const nap = sleep(FOLLOW_EVERY_MS, undefined, { signal: stop.signal }).catch(() => undefined);
      await Promise.race([nap, ...(streamed ? [stream] : [])]);
      if (streamOver) streamed = null;
    }
  } finally {
    stop.abort();
  }
}

/** Why there is nothing to print: not yet, or never (a run that ended without renting has no log). */
async function noLogSentence(client: ReturnType<typeof connectToDaemon>, runId: string, instanceId: number | null): Promise<string> {
  const run = await client.getRun(runId);
  if (!isEndState(run.state)) return `Run ${runId} has no log yet.`;
  if (instanceId === null && run.attempts.every((a) => a.instance_id === null))
    return `Run ${runId} ${endedWords(run.state)} before it rented an instance, so it has no log.`;
  return `Run ${runId} ${endedWords(run.state)}; its instance left no log.`;
}
