// Resolves files shipped with the package (config/, examples/) from both src/ (tests) and dist/src/.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

function packageRoot(): string {
  if (root) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('berth: cannot find the package root');
    dir = up;
  }
  root = dir;
  return dir;
}

export function packagePath(...parts: string[]): string {
  return join(packageRoot(), ...parts);
}

let version: string | undefined;

/** berth's version, from package.json. */
export function packageVersion(): string {
  return (version ??= (JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string }).version);
}
