// A PATH like a slim image's (nvidia/cuda base, python:3.x-slim): the shell and its usual tools,
// but no curl and no wget. Links to this machine's /usr/bin and /bin in a directory of its own.
import { existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';

export function slimPath(dir: string): string {
  mkdirSync(dir, { recursive: true });
  for (const from of ['/usr/bin', '/bin']) {
    for (const name of readdirSync(from)) {
      if (name === 'curl' || name === 'wget' || existsSync(join(dir, name))) continue;
      symlinkSync(join(from, name), join(dir, name));
    }
  }
  return dir;
}
