// `berth logs RUN [--tail N]`: the run's container log (a task's output), live from its instance
// through the service's logs endpoint while it holds one, else the lines kept with its last
// attempt; every secret scrubbed by the daemon. Printed through Io, which shows terminal escapes
// as text: a task's output is data, never commands for the user's terminal.
import { BerthError } from '../../errors.js';
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import type { Io } from '../io.js';

export async function logsCommand(runId: string, options: { tail: string }, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const tail = Number(options.tail);
  if (!Number.isInteger(tail) || tail < 1 || tail > 5000)
    throw new BerthError('bad_request', '--tail must be a whole number from 1 to 5000.');
  const logs = await connectToDaemon(env).logs(runId, tail);
  if (logs.text === '') io.err(`Run ${runId} has no log yet.`);
  else for (const line of logs.text.replace(/\n$/, '').split('\n')) io.out(line);
  return EXIT.ok;
}
