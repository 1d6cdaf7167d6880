// The money caps of a shared store (budget.max_usd_per_hour, budget.max_usd_per_day) are the
// store's, not one daemon's: runs move between daemons (a take-over, a clean stop), so a cap kept by
// one daemon only would stop holding the moment another one drove its runs (a daemon with no cap
// took over the runs of one capped at $0.20/h and billed $0.50/h, silently). Every daemon's create
// gate reads the store's caps at each decision (../runs/compose-runs.ts), whatever its config says.
//
// At start, one step under the caps' advisory lock decides the caps and registers this daemon (its
// heartbeat row, `~daemon:ID`), before any run is driven: so of two daemons started together, the
// second to take the lock sees the first (a count of heartbeats written later, by the first lease
// renewal, let both through, each with its own caps; issue #38 item 2). Then, against the daemons
// registered (live, or stalled: a heartbeat that ended less than `STALLED_MS` ago without a clean
// stop, which deletes it; a SIGSTOPped daemon comes back and creates again):
//   the recorded caps, or none recorded     this daemon goes on;
//   stricter in each cap (or equal)         the store's caps become this daemon's, and every
//                                           daemon holds to them from its next create (the lower
//                                           cap wins), with a warning;
//   looser in any cap, others registered    refused (exit 2), naming both and what to do;
//   looser, nobody else registered          the store's caps become this daemon's, with a warning
//                                           that says what changed (a deliberate change: every
//                                           daemon stopped and started again with the new caps).
import { countText } from '../../count-text.js';
import { ConfigError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { SharedCaps, Store } from '../../store/index.js';
import { heartbeatRow } from './lease-owner.js';

export interface Caps {
  max_usd_per_hour?: number | null | undefined;
  max_usd_per_day?: number | null | undefined;
}

type Figures = Pick<SharedCaps, 'max_usd_per_hour' | 'max_usd_per_day'>;

/**
 * A daemon whose heartbeat ended less than this long ago and that did not stop cleanly may be
 * stalled, not dead (a paused VM, a SIGSTOP): its caps still count against a looser newcomer.
 */
const STALLED_MS = 10 * 60_000;

const show = (usd: number | null) => (usd === null ? 'none' : `$${usd}`);
const describe = (c: Figures) => `max_usd_per_hour ${show(c.max_usd_per_hour)}, max_usd_per_day ${show(c.max_usd_per_day)}`;
/** `a` is at most `b` (no cap is the highest). */
const atMost = (a: number | null, b: number | null) => b === null || (a !== null && a <= b);
const stricterOrEqual = (a: Figures, b: Figures) =>
  atMost(a.max_usd_per_hour, b.max_usd_per_hour) && atMost(a.max_usd_per_day, b.max_usd_per_day);
const same = (a: Figures, b: Figures) => a.max_usd_per_hour === b.max_usd_per_hour && a.max_usd_per_day === b.max_usd_per_day;

/**
 * The caps a daemon of a shared store enforces, read from the store at each call (its create gate's
 * decisions): the recorded ones, which a stricter daemon may have lowered since this one started.
 * Said once each time they come to differ from this daemon's own budget settings.
 */
export function storeCaps(deps: { store: Pick<Store, 'sharedCaps'>; caps: Caps; log: Logger }): () => Figures {
  const own: Figures = { max_usd_per_hour: deps.caps.max_usd_per_hour ?? null, max_usd_per_day: deps.caps.max_usd_per_day ?? null };
  let last = own;
  return () => {
    const recorded = deps.store.sharedCaps.load();
    const now = recorded ? { max_usd_per_hour: recorded.max_usd_per_hour, max_usd_per_day: recorded.max_usd_per_day } : own;
    if (!same(now, last) && !same(now, own)) {
      deps.log.warn(
        { caps: now, by: recorded?.by },
        `this daemon holds to the shared store's money caps (${describe(now)}, recorded by ${recorded?.by}), not its own budget settings (${describe(own)})`,
      );
    }
    last = now;
    return now;
  };
}

/** The others registered on the store, in words: "1 live daemon", "2 live daemons and 1 stalled one (...)". */
function othersText(live: string[], stalled: Array<{ owner: string; expires_at: number }>, now: number): string {
  const parts = live.length > 0 ? [countText(live.length, 'live daemon')] : [];
  if (stalled.length > 0) {
    const ago = Math.round((now - Math.min(...stalled.map((d) => d.expires_at))) / 1000);
    parts.push(
      `${countText(stalled.length, 'daemon')} that stopped renewing ${ago} s ago without a clean stop (stalled or killed: ${stalled.map((d) => d.owner).join(', ')})`,
    );
  }
  return parts.join(' and ');
}

/**
 * Decides the caps and registers this daemon, in one transaction under the caps lock (see the top
 * of the file). Throws ConfigError('budget') when this daemon is refused, having written nothing.
 */
export function agreeOnMoneyCaps(deps: {
  store: Pick<Store, 'transaction' | 'serializeCaps' | 'sharedCaps' | 'leases'>;
  caps: Caps;
  daemonId: string;
  /** The heartbeat's length (cluster.lease_s), ms: renewed from the first cluster tick on. */
  leaseMs: number;
  log: Logger;
}): void {
  const { store, daemonId, log } = deps;
  const mine: Figures = { max_usd_per_hour: deps.caps.max_usd_per_hour ?? null, max_usd_per_day: deps.caps.max_usd_per_day ?? null };
  const change = store.transaction(() => {
    store.serializeCaps();
    const now = store.leases.serverNow();
    const recorded = store.sharedCaps.load();
    const others = store.leases.daemonsSeenSince(now - STALLED_MS).filter((d) => d.owner !== daemonId);
    const register = () => store.leases.acquire(heartbeatRow(daemonId), daemonId, now, deps.leaseMs);
    if (recorded && same(recorded, mine)) {
      register();
      return null;
    }
    if (recorded && others.length > 0 && !stricterOrEqual(mine, recorded)) {
      const live = others.filter((d) => d.expires_at > now).map((d) => d.owner);
      const stalled = others.filter((d) => d.expires_at <= now);
      throw new ConfigError(
        `budget: this daemon's money caps (${describe(mine)}) differ from those of the store it shares with ${othersText(live, stalled, now)} ` +
          `(${describe(recorded)}, recorded by ${recorded.by}) and are looser: caps of a shared store are the store's, and the lower one wins. ` +
          `Give this daemon the store's budget settings (or lower ones); to raise them, stop every daemon cleanly and start them again with the new ones` +
          (stalled.length > 0 ? ` (a daemon that was killed: start it again and stop it, or wait ${STALLED_MS / 60_000} minutes)` : '') +
          '.',
        'budget',
      );
    }
    store.sharedCaps.save({ ...mine, by: daemonId, at: now });
    register();
    return recorded ? { was: recorded, others: others.length } : null;
  });
  if (change) {
    const { was, others } = change;
    log.warn(
      { was: { ...was }, now: mine },
      others > 0
        ? `the money caps of this shared store are lowered from ${describe(was)} (recorded by ${was.by}) to this daemon's ${describe(mine)}: every daemon holds to them from its next create`
        : `the money caps of this shared store change from ${describe(was)} (recorded by ${was.by}) to this daemon's ${describe(mine)}`,
    );
  }
}
