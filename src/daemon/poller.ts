// The one shared poller: one instance-list call per interval for all runs together (the seed
// recommends 10 s), instead of one call per instance, which would run into the per-endpoint rate
// limits as soon as there are a few runs. A failed list is logged and skipped: a network blip must
// never look like a lost instance.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Instance, MarketClient } from '../client/types.js';
import { describeError } from '../errors.js';
import type { Logger } from '../logger.js';

export interface PollerOptions {
  client: MarketClient;
  intervalMs: number;
  log: Logger;
  /** Receives every successful list with the time the call was started. */
  onList(instances: Instance[], listedAt: number): Promise<void> | void;
}

export class InstancePoller {
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private failures = 0;

  constructor(private readonly options: PollerOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** One list now (startup reconciliation); throws when the list fails. */
  async pollOnce(): Promise<void> {
    const listedAt = Date.now();
    const instances = await this.options.client.listInstances({ signal: this.abort.signal });
    await this.options.onList(instances, listedAt);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop?.catch(() => undefined);
  }

  private async run(): Promise<void> {
    const { intervalMs, log } = this.options;
    while (!this.abort.signal.aborted) {
      const started = Date.now();
      try {
        await this.pollOnce();
        if (this.failures > 0) log.info({ failures: this.failures }, 'instance list works again');
        this.failures = 0;
      } catch (err) {
        if (this.abort.signal.aborted) return;
        this.failures++;
        log.warn({ err: describeError(err), failures: this.failures }, 'instance list failed; statuses are not updated this round');
      }
      const wait = intervalMs - (Date.now() - started);
      try {
        await sleep(Math.max(0, wait), undefined, { signal: this.abort.signal });
      } catch {
        return;
      }
    }
  }
}
