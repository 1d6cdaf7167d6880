// `berth logs RUN [--tail N] [--follow]`: the run's container log (a task's output), live from its
// instance through the service's logs endpoint while it holds one, else the lines kept with its last
// attempt; every secret scrubbed by the daemon. Printed through Io, which shows terminal escapes
// as text: a task's output is data, never commands for the user's terminal.
//
// --follow prints each line as the task prints it where the daemon streams the task over SSH, else
// what is new every 5 s (../output-follow.ts), until the run ends; it exits with the task's own
// exit code (../exit-codes.ts, exitCodeForTask: docs/cli.md has the mapping).
import { countText } from '../../count-text.js';
import { BerthError } from '../../errors.js';
import { isEndState } from '../../wire/run-states.js';
import { connectToDaemon } from '../control-client.js';
import { EXIT, exitCodeForTask } from '../exit-codes.js';
import type { Io } from '../io.js';
import { linesOf } from '../log-follow.js';
import { followOutput } from '../output-follow.js';
import { endedWords } from '../render.js';

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

async function followLogs(client: ReturnType<typeof connectToDaemon>, runId: string, tail: number, io: Io): Promise<number> {
  const run = await followOutput(client, runId, { tail, print: (lines) => lines.forEach((l) => io.out(l)), note: (text) => io.err(text) });
  return run.task ? exitCodeForTask(run) : EXIT.ok;
}

/** Why there is nothing to print: not yet, or never (a run that ended without renting has no log). */
async function noLogSentence(client: ReturnType<typeof connectToDaemon>, runId: string, instanceId: number | null): Promise<string> {
  const run = await client.getRun(runId);
  if (!isEndState(run.state)) return `Run ${runId} has no log yet.`;
  if (instanceId === null && run.attempts.every((a) => a.instance_id === null))
    return `Run ${runId} ${endedWords(run.state)} before it rented an instance, so it has no log.`;
  return `Run ${runId} ${endedWords(run.state)}; its instance left no log.`;
}
