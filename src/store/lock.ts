// One daemon per store. The lock file holds the owner's pid; a lock left by a process that no
// longer exists (SIGKILL) is taken over. SQLite's own locking does not stop a second daemon.
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { StoreError } from '../errors.js';

export interface StoreLock {
  path: string;
  release(): void;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function acquireLock(path: string): StoreLock {
  for (let tries = 0; tries < 3; tries++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return {
        path,
        release: () => {
          try {
            if (readFileSync(path, 'utf8').trim() === String(process.pid)) unlinkSync(path);
          } catch {
            // already gone
          }
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new StoreError(`Cannot create the lock file ${path}: ${(err as Error).message}`, err);
      }
      let pid = Number.NaN;
      try {
        pid = Number(readFileSync(path, 'utf8').trim());
      } catch {
        continue; // removed meanwhile: try again
      }
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid)) {
        throw new StoreError(
          `Another berth daemon (pid ${pid}) is already using this store (${path}). Stop it first, or set BERTH_HOME to another directory.`,
        );
      }
      try {
        unlinkSync(path); // stale: its owner is dead
      } catch {
        // someone else removed it
      }
    }
  }
  throw new StoreError(`Cannot take the lock file ${path}.`);
}
