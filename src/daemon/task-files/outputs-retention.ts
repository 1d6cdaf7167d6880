// Kept outputs go with their runs (issue #40's leftover): retention deletes an ended run's rows
// (store.purge), and each daemon then deletes the run's folder under its own files.outputs_dir.
// Every daemon sweeps its own folder, leader or not: the files are on the host of the daemon that
// took them, and only the leader purges rows. A folder is deleted only when it carries this
// store's mark (OWNER_FILE, written by the download before any file) and no run of the store has
// its name: an outputs_dir another store shares, a folder from before the mark, or anything a user
// put there is left alone. A daemon killed between the purge and the sweep sweeps at its next round.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** In each run's folder: the id of the store whose run it is. */
export const OWNER_FILE = '.berth-store';

/** Deletes the run folders of `dir` marked as `storeId`'s whose run `exists` no more; returns their names. */
export function sweepOutputs(dir: string, storeId: string, exists: (runId: string) => boolean): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return []; // no outputs kept yet
  }
  const gone: string[] = [];
  for (const name of names) {
    let owner: string;
    try {
      owner = readFileSync(join(dir, name, OWNER_FILE), 'utf8').trim();
    } catch {
      continue;
    }
    if (owner !== storeId || exists(name)) continue;
    rmSync(join(dir, name), { recursive: true, force: true });
    gone.push(name);
  }
  return gone;
}
