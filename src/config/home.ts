// Where berth keeps its state: $BERTH_HOME, or ~/.berth. Apart from ./load.ts so that the CLI's
// client commands find the daemon without loading the config schema.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** BERTH_STORE_URL: where the store lives (overrides store.url), for commands that take no config. */
export function storeUrlFromEnv(processEnv: NodeJS.ProcessEnv = process.env): string | undefined {
  return processEnv.BERTH_STORE_URL || undefined;
}

export function berthHome(processEnv: NodeJS.ProcessEnv = process.env): string {
  return processEnv.BERTH_HOME || join(homedir(), '.berth');
}

/** Where the daemon keeps tasks' outputs: files.outputs_dir (`~/` is the user's home), else BERTH_HOME/outputs. */
export function outputsDir(config: { files: { outputs_dir?: string | null | undefined } }, home: string): string {
  const dir = config.files.outputs_dir;
  if (!dir) return join(home, 'outputs');
  return dir.startsWith('~/') ? join(homedir(), dir.slice(2)) : resolve(dir);
}
