// The PATH of an image that ships no HTTP client (nvidia/cuda:*-base-*, python:*-slim, distroless):
// a scratch bin directory holding links to every executable of the configured PATH except `curl`
// and `wget`, so that `command -v curl` and `command -v wget` fail in the script as they do in such
// a container. It is a PATH, not a sandbox: an absolute `/usr/bin/curl` still works here.
import { accessSync, chmodSync, constants, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** What such images lack: the two clients a script would use to reach the service. */
export const HTTP_CLIENTS: readonly string[] = ['curl', 'wget'];

/**
 * Makes the bin directory (under `root`) for `path` without `missing` and returns it. The first executable of a
 * name along `path` wins, as a shell's lookup would. The directory is world-readable so that an
 * unprivileged script can use it; the caller removes it.
 */
export function pathWithout(root: string, path: string, missing: readonly string[]): string {
  const bin = mkdtempSync(join(root, 'berth-sim-bin-'));
  chmodSync(bin, 0o755);
  const seen = new Set(missing);
  for (const dir of path.split(delimiter)) {
    if (dir === '') continue;
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue; // a PATH entry that does not exist on this machine
    }
    for (const name of names.sort()) {
      if (seen.has(name)) continue;
      const target = join(dir, name);
      if (!isExecutableFile(target)) continue;
      seen.add(name);
      symlinkSync(target, join(bin, name));
    }
  }
  return bin;
}

export function removeBin(bin: string): void {
  rmSync(bin, { recursive: true, force: true });
}

function isExecutableFile(p: string): boolean {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
