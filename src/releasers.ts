// One last-in-first-out stack of releasers for what a start-up acquires (a store, a client, a
// listener, a timer): each acquisition pushes how to give it back, and one `release` gives back
// everything acquired so far, newest first, whether the start-up failed half-way or the process
// stops. Modelled on graphile-worker's `withReleasers` (src/lib.ts, MIT).
//
// A releaser that returns nothing is run at once, with the next one in the same turn (no timer or
// microtask can run between them); one that returns a promise is awaited before the next.
export type Releaser = () => void | Promise<void>;

export class Releasers {
  private readonly stack: Releaser[] = [];
  private released: Promise<void> | undefined;

  push(releaser: Releaser): void {
    this.stack.push(releaser);
  }

  /**
   * Gives everything back, newest first; once (a second call waits for the first). Every releaser
   * runs even when one throws; the first error is thrown at the end.
   */
  release(): Promise<void> {
    return (this.released ??= this.releaseAll());
  }

  private async releaseAll(): Promise<void> {
    let first: { err: unknown } | undefined;
    // Releasers pushed while releasing (by what is being given back) are given back too.
    for (let r = this.stack.pop(); r !== undefined; r = this.stack.pop()) {
      try {
        const pending = r();
        if (pending) await pending;
      } catch (err) {
        first ??= { err };
      }
    }
    if (first) throw first.err;
  }
}

/**
 * Runs `start` with a fresh stack; if it throws, everything it acquired is given back (newest
 * first) and its error is thrown. On success the stack is the caller's to release later.
 */
export async function withReleasers<T>(start: (releasers: Releasers) => Promise<T>): Promise<T> {
  const releasers = new Releasers();
  try {
    return await start(releasers);
  } catch (err) {
    await releasers.release().catch(() => undefined);
    throw err;
  }
}
