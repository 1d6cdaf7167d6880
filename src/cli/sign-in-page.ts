// The page `berth ui` hands the browser (issue #38 item 4): a file that only its owner can read
// (0600 in a 0700 directory of BERTH_HOME), which sends the browser on to the sign-in URL. The
// opener's command line then carries the file's path, never the code: any local user reads every
// process's arguments in /proc, and a code read there is a session taken first. (Notebook servers
// open their token the same way, for the same reason.)
//
// A file lives until the `berth ui` after its code expired sweeps it away: the code inside works
// once, and the browser may read the file any time before that.
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { BerthError } from '../errors.js';

const NAME = /^sign-in-(\d+)-[0-9a-f]+\.html$/;

const attr = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function page(url: string): string {
  const href = attr(url);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url=${href}">
<title>berth: signing in</title>
</head>
<body><p>Signing in to the berth dashboard… <a href="${href}">Continue</a></p></body>
</html>
`;
}

/** The directory of the sign-in pages, made (or narrowed) to 0700; a symlink or another's directory is refused. */
function pageDir(home: string): string {
  const dir = join(home, 'ui');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory() || (process.getuid && st.uid !== process.getuid())) {
    throw new BerthError('config', `${dir} is not a directory of this user's: remove it and run \`berth ui\` again.`);
  }
  chmodSync(dir, 0o700);
  return dir;
}

/** Writes the page that sends a browser to `url` (a new file, 0600) and returns its path; sweeps expired ones. */
export function writeSignInPage(home: string, url: string, expiresAt: number, now = Date.now()): string {
  const dir = pageDir(home);
  for (const name of readdirSync(dir)) {
    const m = NAME.exec(name);
    if (m && Number(m[1]) <= now) rmSync(join(dir, name), { force: true });
  }
  const path = join(dir, `sign-in-${expiresAt}-${randomBytes(8).toString('hex')}.html`);
  // 'wx': a new file only, so a planted file or symlink of that name is never written through.
  const fd = openSync(path, 'wx', 0o600);
  try {
    writeSync(fd, page(url));
  } finally {
    closeSync(fd);
  }
  return path;
}
