// BERTH_HOME holds the database (with env values), the control token and the lock: it must be
// private to its user. It is created 0700 with its files 0600, and repaired to that when it was
// only too readable. A home another user can write is refused: they could already have replaced a
// file in it, so berth does not trust it until a person has looked.
import { accessSync, chmodSync, constants, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { StoreError } from '../errors.js';

/** Every file berth keeps in BERTH_HOME. */
const HOME_FILES = [
  'berth.db',
  'berth.db-wal',
  'berth.db-shm',
  'berth.db-journal',
  'berth.db.lock',
  'control.token',
  'daemon.json',
  'daemon.lock',
  'store.json',
] as const;

const octal = (mode: number) => `0${(mode & 0o777).toString(8)}`;
const why = (err: unknown) => (err as NodeJS.ErrnoException).code ?? (err as Error).message;

/** Creates BERTH_HOME (0700) or checks and repairs an existing one; throws StoreError with what to do. */
export function prepareHome(home: string): void {
  try {
    mkdirSync(home, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new StoreError(`Cannot create BERTH_HOME ${home} (${why(err)}): set BERTH_HOME to a directory you can write.`, err);
  }
  const st = statSync(home);
  if (!st.isDirectory()) throw new StoreError(`BERTH_HOME ${home} is not a directory: set BERTH_HOME to a directory.`);
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    throw new StoreError(
      `BERTH_HOME ${home} belongs to another user (uid ${st.uid}): run berth as that user, or set BERTH_HOME to a directory of your own.`,
    );
  }
  if (st.mode & 0o022) {
    throw new StoreError(
      `BERTH_HOME ${home} can be written by other users (mode ${octal(st.mode)}), who could have replaced its files: check them, then run \`chmod 700 ${home}\`.`,
    );
  }
  try {
    accessSync(home, constants.W_OK);
  } catch (err) {
    throw new StoreError(`BERTH_HOME ${home} is not writable (${why(err)}): set BERTH_HOME to a directory you can write.`, err);
  }
  if (st.mode & 0o077) chmodSync(home, 0o700);
  for (const name of HOME_FILES) {
    const path = join(home, name);
    try {
      if (statSync(path).mode & 0o077) chmodSync(path, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new StoreError(`Cannot secure ${path} (${why(err)}).`, err);
    }
  }
}
