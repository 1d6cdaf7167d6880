// Where each of a spec's `outputs` paths is kept (issue #48 item 5): a container path becomes a name
// under the attempt's folder on the daemon's host, and `berth outputs` puts it under DEST by that
// name. Two paths kept under one name (`res/` is /root/workdir/res, `/res/` is /res: both kept as
// `res`), or one inside the other's (`out` and `/root/workdir/out/a`), would keep one file over the
// other and list the name twice; the spec check (./schema.ts) refuses them at submit.
import { posix } from 'node:path';

/** The task's working directory in the container: relative output paths are relative to it (docs/files.md). */
const OUTPUTS_BASE = '/root/workdir';

/** A spec's output path as an absolute container path, without a trailing slash. */
export function resolvedOutputPath(p: string): string {
  return (p.startsWith('/') ? p : `${OUTPUTS_BASE}/${p}`).replace(/\/+$/, '') || '/';
}

/** The name a container path is kept under, relative to the attempt's folder. */
export function keptOutputName(path: string): string {
  const base = `${OUTPUTS_BASE}/`;
  return path.startsWith(base) ? path.slice(base.length) : path.replace(/^\/+/, '');
}

/** Each later path whose kept name is an earlier one's, or holds it, or lies inside it. */
export function clashingOutputs(paths: string[]): Array<{ index: number; other: number; name: string }> {
  const names = paths.map((p) => posix.normalize(keptOutputName(posix.normalize(resolvedOutputPath(p)))).replace(/\/+$/, ''));
  const clashes: Array<{ index: number; other: number; name: string }> = [];
  names.forEach((name, index) => {
    const other = names.findIndex((n, j) => j < index && (n === name || name.startsWith(`${n}/`) || n.startsWith(`${name}/`)));
    if (other !== -1) clashes.push({ index, other, name });
  });
  return clashes;
}
