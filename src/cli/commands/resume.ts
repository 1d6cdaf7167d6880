// `berth resume RUN`: a run held after a restored backup may go on. Held runs rent nothing until
// then, since the backup cannot tell whether they were cancelled or ended after it was taken.
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import type { Io } from '../io.js';

export async function resumeCommand(runId: string, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const run = await connectToDaemon(env).resume(runId);
  io.out(`Run ${run.id} goes on from where the backup left it (now ${run.state}).`);
  return EXIT.ok;
}
