// One commit for many small writes that come together. Each commit of berth.db waits for the disk
// (synchronous=FULL) while it holds the daemon's one thread: a hundred tasks ending at once were
// two hundred commits (each task's last lines, then its run's transition), and under the load of
// their ends a commit took 17 ms at the median and 200 ms at the 90th percentile (timed around
// each transaction in `npm run bench -- --only tasks-ssh`; 1 ms before the ends). In one group
// the same bench records the ends 1-1.5 s sooner at the median.
//
// The writes handed over in one turn of the event loop are run in the next, each in a savepoint of
// one transaction: a write that throws is rolled back alone and its caller told; the others commit.
// A caller learns that its write committed only once the whole group has (its promise): what it
// does next in the world (a wrapper told it may stop its instance) waits for that. What a write
// set going in memory (a run's machine moved on) learns of a commit that failed after it through
// the store's `ifRolledBack`.
//
// Writes run synchronously inside the group, as they would alone: a side effect they start (a
// call through the limiter) leaves only after the group has committed or failed, as after a
// transaction of their own.
export interface GroupCommitDeps {
  /** The store's transaction: nested calls are savepoints (./index.ts). */
  transaction<T>(fn: () => T): T;
}

interface Pending {
  write: () => void;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class GroupCommit {
  private queue: Pending[] = [];

  constructor(private readonly deps: GroupCommitDeps) {}

  /** Runs `write` in the next group; resolves once that has committed, rejects if `write` threw or the group did not commit. */
  add(write: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ write, resolve, reject });
      if (this.queue.length === 1) setImmediate(() => this.commit());
    });
  }

  private commit(): void {
    const group = this.queue;
    this.queue = [];
    const failed = new Map<Pending, unknown>();
    try {
      this.deps.transaction(() => {
        for (const p of group) {
          try {
            this.deps.transaction(p.write);
          } catch (err) {
            failed.set(p, err);
          }
        }
      });
    } catch (err) {
      for (const p of group) p.reject(failed.get(p) ?? err);
      return;
    }
    for (const p of group) {
      if (failed.has(p)) p.reject(failed.get(p));
      else p.resolve();
    }
  }
}
