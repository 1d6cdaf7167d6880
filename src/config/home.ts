// Where berth keeps its state: $BERTH_HOME, or ~/.berth. Apart from ./load.ts so that the CLI's
// client commands find the daemon without loading the config schema.
import { homedir } from 'node:os';
import { join } from 'node:path';

export function berthHome(processEnv: NodeJS.ProcessEnv = process.env): string {
  return processEnv.BERTH_HOME || join(homedir(), '.berth');
}
