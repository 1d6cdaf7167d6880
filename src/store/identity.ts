// store.json: which store lives in this BERTH_HOME and how far it has got, mirrored outside the
// database so that a database put back from a backup, replaced by another, emptied or deleted is
// noticed at start instead of being taken for the truth.
//
// The database counts a generation, bumped in every transaction that records a run's progress,
// submission or cancellation; after each commit the daemon writes {store_id, generation} here.
// The file is written after the commit, never before, so it can lag the database but never lead it:
// - file == database: the normal case;
// - file < database: the daemon was killed between a commit and this write (or the file was lost
//   with power): nothing is missing, the file is brought up to date;
// - file > database: the database is older than what this home has seen, i.e. a backup was
//   restored. Every run it shows live may have been cancelled or ended since the backup, so those
//   runs are held until a person confirms them (`berth resume RUN`) or cancels them.
// A backup taken at any instant holds a generation no higher than the file's at that instant, so
// any change recorded after the backup makes its restore visible.
//
// The record is one fixed-width line rewritten in place with a single write on a descriptor kept
// open, so that it costs one syscall per transaction and is never seen half-written by a reader.
import { closeSync, constants, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { StoreError } from '../errors.js';

export interface StoreMark {
  storeId: string;
  generation: number;
}

/** What store.json says: a mark, nothing (no store ever ran here), or a file berth cannot read. */
export type MarkReading = { kind: 'mark'; mark: StoreMark } | { kind: 'absent' } | { kind: 'unreadable' };

const RECORD_BYTES = 80;

const markPath = (home: string) => join(home, 'store.json');

export function readMark(home: string): MarkReading {
  let text: string;
  try {
    text = readFileSync(markPath(home), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    return { kind: 'unreadable' };
  }
  try {
    const v = JSON.parse(text) as { store_id?: unknown; generation?: unknown };
    if (typeof v.store_id === 'string' && Number.isSafeInteger(v.generation)) {
      return { kind: 'mark', mark: { storeId: v.store_id, generation: v.generation as number } };
    }
  } catch {
    // torn by a power loss, or not ours
  }
  return { kind: 'unreadable' };
}

/** Keeps store.json open and rewrites it in place. */
export class MarkWriter {
  private fd: number | undefined;
  private sized = false;

  constructor(private readonly home: string) {
    try {
      // Not truncated at open: a kill right after would leave an empty file and lose the mark.
      this.fd = openSync(markPath(home), constants.O_RDWR | constants.O_CREAT, 0o600);
    } catch (err) {
      throw new StoreError(
        `Cannot write ${markPath(home)} (${(err as NodeJS.ErrnoException).code ?? String(err)}): check that BERTH_HOME is writable and not full.`,
        err,
      );
    }
  }

  /** Records a committed generation; a failed write is left for the next one (the file may lag). */
  write(mark: StoreMark): void {
    if (this.fd === undefined) return;
    const line = JSON.stringify({ store_id: mark.storeId, generation: mark.generation });
    const record = Buffer.alloc(RECORD_BYTES, ' ');
    record.write(line, 0, 'utf8');
    record[RECORD_BYTES - 1] = 0x0a;
    try {
      writeSync(this.fd, record, 0, RECORD_BYTES, 0);
      if (!this.sized) ftruncateSync(this.fd, RECORD_BYTES);
      this.sized = true;
    } catch {
      // A full disk: the database refuses writes too, and the next commit rewrites this.
    }
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}
