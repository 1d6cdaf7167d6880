// One API key, one rate budget (issue #21 item 4). The service enforces its limits per key as a
// minimum interval between two calls of one group, so daemons sharing a key must space their calls
// from each other's, not only from their own: each daemon's share of the rate (1/N, set on its
// client) keeps the sum under the threshold, but two daemons' calls may still land a moment apart
// and draw a 429 (and for a create, a 12 s penalty for the whole key). So every call, once its own
// daemon's limiter lets it go, claims the group's next free moment in the store (rate_slots, on
// the database's clock) and waits for it. A store that does not answer costs the call no wait: the
// daemon's own share still holds, and a 429 is retried as always.
import type { Clock } from '../../clock.js';
import type { Config, RateGroup } from '../../config/schema.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import type { LeaseOwner } from './lease-owner.js';

export interface SharedPaceDeps {
  store: Pick<Store, 'rateSlots'>;
  /** The database's clock, as the leases measure it. */
  owner: Pick<LeaseOwner, 'now'>;
  clock: Pick<Clock, 'sleep'>;
  log: Logger;
  rateLimits: Config['rate_limits'];
}

export class SharedPace {
  private failing = false;

  constructor(private readonly deps: SharedPaceDeps) {}

  /** Resolves when a call of `group` may go as far as every daemon on the store is concerned. */
  async wait(group: RateGroup, signal?: AbortSignal): Promise<void> {
    const { store, owner, clock, log, rateLimits } = this.deps;
    let at: number;
    try {
      at = store.rateSlots.claim(group, owner.now(), 1000 / rateLimits[group].per_s);
      if (this.failing) log.info('the store answers again: calls are spaced with the other daemons again');
      this.failing = false;
    } catch (err) {
      if (!this.failing) log.warn({ err: toRunError(err) }, 'cannot space calls with the other daemons now (the store does not answer)');
      this.failing = true;
      return;
    }
    const waitMs = at - owner.now();
    if (waitMs > 0) await clock.sleep(waitMs, signal);
  }
}
