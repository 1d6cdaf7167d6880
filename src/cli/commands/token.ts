// `berth token rotate`: a new control token. A running daemon makes it (and stops accepting the old
// one at once); with no daemon running, control.token is rewritten for the next one.
import { berthHome } from '../../config/home.js';
import { writeNewControlToken } from '../../config/control-token.js';
import { BerthError } from '../../errors.js';
import { ControlClient, readDaemonAddress } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import type { Io } from '../io.js';

export async function tokenRotateCommand(io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const home = berthHome(env);
  let client: ControlClient | undefined;
  try {
    client = new ControlClient(readDaemonAddress(home));
    await client.verify();
  } catch (err) {
    if (!(err instanceof BerthError) || err.code !== 'daemon_unreachable') throw err;
    client = undefined;
  }
  if (client) {
    await client.rotateToken();
    io.out(`Rotated the control token: the daemon accepts only the new one, in ${home}/control.token.`);
  } else {
    writeNewControlToken(home);
    io.out(`Rotated the control token in ${home}/control.token (no daemon is running; the next one uses it).`);
  }
  return EXIT.ok;
}
