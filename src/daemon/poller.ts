// The one shared poller: one instance-list call per interval for all runs together (the seed
// recommends 10 s), instead of one call per instance, which would run into the per-endpoint rate
// limits as soon as there are a few runs. It is also the only source of lists for the rest of the
// daemon: a run that must look for its label (a create with an unknown outcome) waits for the next
// list instead of making its own call, so many look-ups cost one call and never delay the status
// polls. A failed list is logged and skipped: a network blip must never look like a lost instance.
//
// States: sleeping until the next interval (or until a waiter asks for a list sooner) → listing →
// delivering to onList and to waiters → sleeping. Left for good by stop().
import type { Instance, MarketClient } from '../client/types.js';
import { BerthError, describeError } from '../errors.js';
import type { Logger } from '../logger.js';

export interface PollerOptions {
  client: MarketClient;
  intervalMs: number;
  log: Logger;
  /** Receives every successful list with the time the call was started. */
  onList(instances: Instance[], listedAt: number): Promise<void> | void;
}

/** What the run actors need of the poller. */
export interface InstanceLists {
  /** The first successful list started at or after `after` (ms since epoch); asks for one soon. */
  next(after: number, signal?: AbortSignal): Promise<Instance[]>;
}

interface Waiter {
  after: number;
  resolve(instances: Instance[]): void;
  reject(err: unknown): void;
}

export class InstancePoller implements InstanceLists {
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private failures = 0;
  private waiters: Waiter[] = [];
  private wake: (() => void) | undefined;

  constructor(private readonly options: PollerOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** One list now (startup reconciliation); throws when the list fails. */
  async pollOnce(): Promise<void> {
    const listedAt = Date.now();
    const instances = await this.options.client.listInstances({ signal: this.abort.signal });
    await this.options.onList(instances, listedAt);
    this.deliver(instances, listedAt);
  }

  next(after: number, signal?: AbortSignal): Promise<Instance[]> {
    return new Promise<Instance[]>((resolve, reject) => {
      if (this.abort.signal.aborted) return reject(new BerthError('aborted', 'The daemon is stopping.'));
      const waiter: Waiter = {
        after,
        resolve: (l) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(l);
        },
        reject,
      };
      const onAbort = () => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new BerthError('aborted', 'The wait for an instance list was cancelled.'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
      this.wake?.();
    });
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.wake?.();
    for (const w of this.waiters.splice(0)) w.reject(new BerthError('aborted', 'The daemon is stopping.'));
    await this.loop?.catch(() => undefined);
  }

  private deliver(instances: Instance[], listedAt: number): void {
    const ready = this.waiters.filter((w) => w.after <= listedAt);
    this.waiters = this.waiters.filter((w) => w.after > listedAt);
    for (const w of ready) w.resolve(instances);
  }

  /** Sleeps until the next interval, or at once when someone waits for a list (unless the last list failed). */
  private pause(ms: number, failed: boolean): Promise<void> {
    if ((this.waiters.length > 0 && !failed) || ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        if (!failed || this.abort.signal.aborted) done();
      };
    });
  }

  private async run(): Promise<void> {
    const { intervalMs, log } = this.options;
    while (!this.abort.signal.aborted) {
      const started = Date.now();
      let failed = false;
      try {
        await this.pollOnce();
        if (this.failures > 0) log.info({ failures: this.failures }, 'instance list works again');
        this.failures = 0;
      } catch (err) {
        if (this.abort.signal.aborted) return;
        this.failures++;
        failed = true;
        log.warn({ err: describeError(err), failures: this.failures }, 'instance list failed; statuses are not updated this round');
      }
      // The limiter keeps extra lists asked for by waiters within the list rate limit.
      await this.pause(intervalMs - (Date.now() - started), failed);
    }
  }
}
