// GET /v1/account (the dashboard's Account and Money pages): the credit as the account watch last
// read it, what the daemon's instances bill now and cost in the last 24 h beside the daemon-wide
// caps (budget.max_usd_per_hour, budget.max_usd_per_day), and the rate limits met per endpoint
// group. The create gate's own check adds what booting instances may yet cost; this shows what
// was spent.
import type { ClientStats } from '../../client/events.js';
import { RATE_GROUPS, type Config } from '../../config/schema.js';
import type { Store } from '../../store/index.js';
import { round6 } from '../../store/spend.js';
import { billsSince, usdPerHour, usdSince } from '../instances/holdings.js';
import type { AccountView } from '../../wire/control-api.js';

const DAY_MS = 86_400_000;

export interface AccountViewDeps {
  store: Store;
  now: number;
  account: { readonly credit: number | null; readonly low: boolean };
  config: Pick<Config, 'account' | 'budget'>;
  stats: ClientStats;
}

export function accountView({ store, now, account, config, stats }: AccountViewDeps): AccountView {
  const bills = billsSince(store, now - DAY_MS, now);
  return {
    credit: { usd: account.credit, min_usd: config.account.min_credit_usd, low: account.low },
    money: {
      usd_per_hour: round6(usdPerHour(bills)),
      usd_last_24h: round6(usdSince(bills, now - DAY_MS)),
      max_usd_per_hour: config.budget.max_usd_per_hour ?? null,
      max_usd_per_day: config.budget.max_usd_per_day ?? null,
    },
    rate_limits: RATE_GROUPS.map((group) => ({
      group,
      // The rate this daemon keeps to now: the configured one times its share of the key (#21).
      per_s: stats.groups[group].perS,
      rate_limited: stats.groups[group].rateLimited,
      pauses: stats.groups[group].pauses,
      paused: stats.groups[group].paused,
      paused_ms: stats.groups[group].pausedMs,
    })),
  };
}
