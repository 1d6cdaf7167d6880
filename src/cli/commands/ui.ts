// `berth ui`: asks the daemon (with the control token) for a one-time sign-in code of the web
// dashboard and prints the URL that uses it; it also opens it where a browser is at hand (a
// desktop session with xdg-open, or macOS's open). Nothing fails for want of one: the URL is
// printed either way, for a browser elsewhere (through an SSH tunnel to the same port).
//
// The browser is given a file of the owner's (../sign-in-page.ts), never the URL: an opener's
// arguments are in /proc for every local user to read (issue #38 item 4).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { berthHome } from '../../config/home.js';
import { connectToDaemon } from '../control-client.js';
import { writeSignInPage } from '../sign-in-page.js';
import { EXIT } from '../exit-codes.js';
import type { Io } from '../io.js';

/** The command that opens a URL in the desktop's browser, when there is a desktop. */
function opener(env: NodeJS.ProcessEnv): string | undefined {
  const onPath = (cmd: string) => (env.PATH ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, cmd)));
  if (process.platform === 'darwin') return onPath('open') ? 'open' : undefined;
  if (!env.DISPLAY && !env.WAYLAND_DISPLAY) return undefined;
  return onPath('xdg-open') ? 'xdg-open' : undefined;
}

export async function uiCommand(options: { open: boolean }, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const { url, expires_at } = await connectToDaemon(env).signInCode();
  io.out(url);
  io.err(`This link signs one browser in to the berth dashboard; it works once, until ${new Date(expires_at).toLocaleTimeString()}.`);
  const cmd = options.open ? opener(env) : undefined;
  if (cmd) {
    const page = pathToFileURL(writeSignInPage(berthHome(env), url, Date.parse(expires_at))).href;
    // Detached and ignored: a browser that fails to start (or may not read BERTH_HOME, as a
    // confined one may not) leaves the printed link.
    const child = spawn(cmd, [page], { detached: true, stdio: 'ignore' });
    child.on('error', () => undefined);
    child.unref();
  }
  return EXIT.ok;
}
