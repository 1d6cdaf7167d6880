// A run's output, followed until the run ends: what `berth logs --follow` prints, and what
// `berth submit --wait` prints of a task above its progress line (issue #50).
//
// While the daemon streams the task over SSH (issue #39): the run's event stream with its output
// (`output=1`), opened before the first read, so every line kept after that read comes by the
// stream and is printed as it comes (each batch once, by its byte offset: ./log-follow.ts). The
// log is read again every FOLLOW_EVERY_MS all the same (from the store while streamed: no call to the
// service), and, when the daemon does not stream the task (no SSH, the follow dropped, another
// daemon of a shared store follows it), that read is the follow: one logs request to the service
// (rate group `other`) each, so the pace is slow on purpose, printing what is new until the run ends.
import { setTimeout as sleep } from 'node:timers/promises';
import { countText } from '../count-text.js';
import { BerthError } from '../errors.js';
import { isEndState } from '../wire/run-states.js';
import type { Run, StreamOutput } from '../wire/control-api.js';
import type { ControlClient } from './control-client.js';
import { linesOf, newLinesAcrossSources, StreamedLog } from './log-follow.js';

const FOLLOW_EVERY_MS = 5_000;

/** Batches held while no read has said where the stream stands (the lines they hold may be in it). */
const HELD_MAX = 64;

export interface OutputFollowOptions {
  /** Lines of the first read (and the most one read may hold): `--tail`. */
  tail: number;
  /** The task's lines, in order, each once. */
  print(lines: readonly string[]): void;
  /** A sentence about what was left out (for stderr). */
  note(text: string): void;
  /** Resolves when the caller saw the run end: the next read comes at once instead of after the nap. */
  ended?: Promise<unknown>;
  /** Stops following (the run carries on): the promise then rejects with `aborted`. */
  signal?: AbortSignal;
}

/** Follows `runId`'s output until the run has ended and its last lines are printed; resolves with the run as it ended. */
export async function followOutput(client: ControlClient, runId: string, options: OutputFollowOptions): Promise<Run> {
  const { tail, note } = options;
  let printed: string[] = [];
  const print = (lines: readonly string[]) => {
    if (lines.length > 0) options.print(lines);
    printed = [...printed, ...lines].slice(-tail);
  };
  const gapNote = () => note('(some lines were left out: the task printed faster than berth streams; `berth logs` shows what was kept)');
  let streamed: StreamedLog | null = null;
  let held: StreamOutput[] = [];
  const take = (o: StreamOutput) => {
    const { lines, gap } = streamed!.take(o);
    if (gap) gapNote();
    print(lines);
  };
  const stop = new AbortController();
  const abort = () => stop.abort();
  options.signal?.addEventListener('abort', abort);
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
      const run = await client.getRun(runId);
      const read = await client.logs(runId, tail);
      const at = read.stream ?? null;
      if (first && read.cut)
        note(`(earlier lines left out: showing the last ${countText(linesOf(read.text).length, 'line')} berth could read of a longer log)`);
      if (at === null || streamed === null || at.n !== streamed.attempt) {
        // Not streamed, or streamed from this read on: the read is what is new.
        // A read is the container's log (sshd's lines in it) or the follower's kept out-file, and
        // which one can change between two reads: the overlap is sought across sources.
        const { lines, gap } = newLinesAcrossSources(printed, linesOf(read.text));
        if (gap) note('(more lines were written than --tail holds between two reads: some may be missing)');
        print(lines);
        streamed = at && !streamOver ? new StreamedLog(at) : null;
        if (streamed) for (const o of held) take(o);
        held = [];
      }
      if (isEndState(run.state)) return run;
      // Streamed: read again once the run's stream ends (the run ended) or after FOLLOW_EVERY_MS.
      const nap = sleep(FOLLOW_EVERY_MS, undefined, { signal: stop.signal }).catch(() => undefined);
      await Promise.race([nap, ...(streamed ? [stream] : []), ...(options.ended ? [options.ended] : [])]);
      if (options.signal?.aborted) throw new BerthError('aborted', `Stopped following run ${runId}'s output; it carries on in the daemon.`);
      if (streamOver) streamed = null;
    }
  } finally {
    options.signal?.removeEventListener('abort', abort);
    stop.abort();
  }
}
