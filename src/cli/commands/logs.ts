// `berth logs RUN [--tail N] [--follow]`: the run's container log (a task's output), live from its
// instance through the service's logs endpoint while it holds one, else the lines kept with its last
// attempt; every secret scrubbed by the daemon. Printed through Io, which shows terminal escapes
// as text: a task's output is data, never commands for the user's terminal.
//
// --follow reads again every FOLLOW_EVERY_MS and prints what is new until the run ends. Each read is
// one logs request to the service (rate group `other`), so the pace is slow on purpose.
import { countText } from '../../count-text.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError } from '../../errors.js';
import { isEndState } from '../../wire/run-states.js';
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import type { Io } from '../io.js';
import { linesOf, newLines } from '../log-follow.js';
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
  const first = await client.logs(runId, tail);
  let printed = linesOf(first.text);
  if (printed.length === 0 && !options.follow) io.err(await noLogSentence(client, runId, first.instance_id));
  if (first.cut) io.err(`(earlier lines left out: showing the last ${countText(printed.length, 'line')} berth could read of a longer log)`);
  for (const line of printed) io.out(line);
  if (!options.follow) return EXIT.ok;
  for (;;) {
    // The state first: a run that has ended still gets one last read, so its final lines show.
    const ended = isEndState((await client.getRun(runId)).state);
    const next = linesOf((await client.logs(runId, tail)).text);
    const { lines, gap } = newLines(printed, next);
    if (gap) io.err('(more lines were written than --tail holds between two reads: some may be missing)');
    for (const line of lines) io.out(line);
    printed = [...printed, ...lines].slice(-tail);
    if (ended) return EXIT.ok;
    await sleep(FOLLOW_EVERY_MS);
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
