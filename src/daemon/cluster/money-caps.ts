// The money caps of a shared store (budget.max_usd_per_hour, budget.max_usd_per_day) are the
// store's, not one daemon's: runs move between daemons (a take-over, a clean stop), so a cap kept by
// one daemon only would stop holding the moment another one drove its runs (a daemon with no cap
// took over the runs of one capped at $0.20/h and billed $0.50/h, silently).
//
// At start, under the caps' advisory lock: a daemon whose caps are the recorded ones goes on; one
// whose caps differ is refused (exit 2) while any other daemon is live, naming both; when it is
// alone on the store its caps become the store's, with a warning that says what changed (a
// deliberate change: every daemon stopped and started again with the new caps).
import { countText } from '../../count-text.js';
import { ConfigError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { SharedCaps, Store } from '../../store/index.js';

export interface Caps {
  max_usd_per_hour?: number | null | undefined;
  max_usd_per_day?: number | null | undefined;
}

const show = (usd: number | null) => (usd === null ? 'none' : `$${usd}`);
const describe = (c: Pick<SharedCaps, 'max_usd_per_hour' | 'max_usd_per_day'>) =>
  `max_usd_per_hour ${show(c.max_usd_per_hour)}, max_usd_per_day ${show(c.max_usd_per_day)}`;

export function agreeOnMoneyCaps(deps: {
  store: Pick<Store, 'transaction' | 'serializeCaps' | 'sharedCaps' | 'leases'>;
  caps: Caps;
  daemonId: string;
  log: Logger;
}): void {
  const { store, daemonId, log } = deps;
  const mine = { max_usd_per_hour: deps.caps.max_usd_per_hour ?? null, max_usd_per_day: deps.caps.max_usd_per_day ?? null };
  const change = store.transaction(() => {
    store.serializeCaps();
    const now = store.leases.serverNow();
    const recorded = store.sharedCaps.load();
    if (recorded && recorded.max_usd_per_hour === mine.max_usd_per_hour && recorded.max_usd_per_day === mine.max_usd_per_day) return null;
    const others = store.leases.liveDaemonIds(now).filter((id) => id !== daemonId);
    if (recorded && others.length > 0) {
      throw new ConfigError(
        `budget: this daemon's money caps (${describe(mine)}) differ from those of the store it shares with ${countText(others.length, 'live daemon')} ` +
          `(${describe(recorded)}, recorded by ${recorded.by}): caps of a shared store are the store's. Give every daemon the same budget settings; ` +
          `to change them, stop every daemon and start them again with the new ones.`,
        'budget',
      );
    }
    store.sharedCaps.save({ ...mine, by: daemonId, at: now });
    return recorded ?? null;
  });
  if (change) {
    log.warn(
      { was: { ...change }, now: mine },
      `the money caps of this shared store change from ${describe(change)} (recorded by ${change.by}) to this daemon's ${describe(mine)}`,
    );
  }
}
