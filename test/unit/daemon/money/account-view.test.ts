// GET /v1/account's rate limits show the rate this daemon keeps to now: the configured one, or its
// share of it when daemons share one API key (issue #21).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createMarketClient } from '../../../../src/client/marketplace-client.js';
import { accountView } from '../../../../src/daemon/money/account-view.js';
import { openStore } from '../../../../src/store/index.js';
import { testConfig } from '../../client/fake-server.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('account view', () => {
  it("shows each group's rate as this daemon's share of the configured one", () => {
    const home = mkdtempSync(join(tmpdir(), 'berth-account-'));
    const store = openStore({ home });
    cleanups.push(
      () => rmSync(home, { recursive: true, force: true }),
      () => store.close(),
    );
    const config = testConfig({ rate: { show: { per_s: 2, burst: 1 } } });
    const client = createMarketClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k', config });
    cleanups.push(() => client.close());
    const view = () =>
      accountView({
        store,
        now: 0,
        account: { credit: 10, low: false },
        config: { account: { min_credit_usd: 1, check_interval_s: 300, held_check_interval_s: 30 }, budget: {} },
        stats: client.stats(),
      }).rate_limits.find((r) => r.group === 'show')!.per_s;
    expect(view()).toBe(2);
    client.setRateShare(1 / 2);
    expect(view()).toBe(1);
  });
});
