// Issue #38 item 2: the money caps of a Postgres store shared by several `berth daemon` processes
// are decided in one step with each daemon's registration, so two daemons with different budget
// caps, started together or while the capped one is stalled (SIGSTOP), never each enforce their own:
// one is refused (exit 2, naming both caps), or both hold to the lower one. Checked in the
// simulator's own history: never more than the lower cap billing at once.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DeepPartial } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import type { RunningSimulator, SimInstanceHistory } from '../../src/sim/index.js';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { createPgDatabase, queryPg, type PgDatabase } from '../helpers/pg-database.js';
import { FAST_CONFIG, FAST_SIM, jobSpec } from '../helpers/world.js';

const CAP = 0.2;

let sim: RunningSimulator;
let database: PgDatabase;

beforeEach(async () => {
  database = await createPgDatabase();
  sim = await world.sim({ seed: 38, config: FAST_SIM });
});
afterEach(async () => {
  await database.drop();
});
// Registered after the hook above, so run before it (vitest runs after-hooks as a stack): the daemons end before their database.
const world = useSpawnedWorld();
const home = () => world.home('berth-caps-');

/** A daemon process on the shared store, with `budget` as its caps. */
async function daemon(at: string, budget: DeepPartial<Config['budget']>): Promise<DaemonProcess> {
  return world.spawn(
    {
      home: at,
      simUrl: sim.url,
      apiKey: sim.apiKey,
      config: { ...FAST_CONFIG, store: { url: database.url }, cluster: { lease_s: 3 }, budget },
    },
    30_000,
  );
}

/** The billed $/h of ours alive in the simulator at each moment one of ours was created: the most. */
function peakDph(history: SimInstanceHistory[]): number {
  const ours = history.filter((h) => h.label?.startsWith('berth:'));
  let peak = 0;
  for (const h of ours) {
    const t = h.created_at.wall_ms;
    const live = ours.filter((o) => o.created_at.wall_ms <= t && (o.destroyed_at === null || o.destroyed_at.wall_ms > t));
    peak = Math.max(
      peak,
      live.reduce((s, o) => s + o.compute_dph + o.disk_dph, 0),
    );
  }
  return peak;
}

/**
 * Submits `n` runs to each daemon (offers of at most $0.2/h, about $0.09-0.17: two or three fit under
 * $0.5/h, not under $0.2/h) and waits until each runs, waits for a cap, or ended (a loaded machine
 * may fail a boot: it is neither).
 */
async function submitAndSettle(ds: DaemonProcess[], n: number): Promise<{ running: number; waiting: number }> {
  const spec = jobSpec({ max_price_per_hour: 0.2, deadline_s: 300 });
  const runs: Array<{ d: DaemonProcess; run: RunView }> = [];
  for (const d of ds) {
    for (let i = 0; i < n; i++) {
      const res = await d.api<RunView>('POST', '/v1/runs', { ...spec, name: `caps-${runs.length}` });
      expect(res.status).toBe(201);
      runs.push({ d, run: res.body });
    }
  }
  for (;;) {
    let running = 0;
    let waiting = 0;
    let ended = 0;
    for (const { d, run } of runs) {
      const view = (await d.api<RunView>('GET', `/v1/runs/${run.id}`)).body;
      const events = (await d.api<Array<{ type: string }>>('GET', `/v1/runs/${run.id}/events`)).body;
      if (view.state === 'running') running++;
      else if (view.state === 'failed' || view.state === 'cancelled' || view.state === 'expired') ended++;
      else if (events.some((e) => e.type === 'create.waiting')) waiting++;
    }
    if (running + waiting + ended === runs.length && running > 0) return { running, waiting };
    await sleep(200);
  }
}

/** The daemon's log (stdout and stderr) in its home. */
const logOf = (at: string) => readFileSync(join(at, 'daemon.log'), 'utf8');

describe('money caps of a shared store (#38 item 2)', () => {
  it('a daemon with no cap started while the capped one is stalled past its lease is refused, naming both caps; spend stays under the cap', async () => {
    const cappedHome = home();
    const capped = await daemon(cappedHome, { max_usd_per_hour: CAP });
    process.kill(capped.proc.pid!, 'SIGSTOP');
    try {
      // Stalled (a frozen VM, a long pause): once no heartbeat is live, its lease has ended.
      for (;;) {
        const [row] = await queryPg<{ live: string }>(
          database.url,
          `SELECT count(*) AS live FROM run_leases WHERE run_id LIKE '~daemon:%' AND expires_at > floor(extract(epoch FROM clock_timestamp()) * 1000)`,
        );
        if (Number(row!.live) === 0) break;
        await sleep(200);
      }
      const looseHome = home();
      await expect(daemon(looseHome, {})).rejects.toThrow(/exited with 2/);
      const said = logOf(looseHome);
      expect(said).toMatch(
        /budget: this daemon's money caps \(max_usd_per_hour none, max_usd_per_day none\) differ from those of the store/,
      );
      expect(said).toMatch(/max_usd_per_hour \$0\.2, max_usd_per_day none, recorded by/);
      expect(said).toMatch(/without a clean stop \(stalled or killed/);
      expect(said).toMatch(/stop every daemon cleanly and start them again with the new ones/);
    } finally {
      process.kill(capped.proc.pid!, 'SIGCONT');
    }
    // Woken, the capped daemon goes on alone, under its cap (once it answers again: a connection
    // opened as it wakes may be reset).
    for (;;) {
      try {
        if ((await capped.api('GET', '/healthz')).status === 200) break;
      } catch {
        // waking up
      }
      await sleep(200);
    }
    const { waiting } = await submitAndSettle([capped], 4);
    expect(waiting).toBeGreaterThan(0);
    expect(peakDph(sim.history())).toBeLessThanOrEqual(CAP + 1e-9);
  }, 120_000);

  it('two daemons with different caps started together: one is refused or both hold to the lower cap; spend stays under it', async () => {
    const homesOf = [home(), home()];
    const started = await Promise.allSettled([daemon(homesOf[0]!, { max_usd_per_hour: CAP }), daemon(homesOf[1]!, {})]);
    const live = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const refused = started.flatMap((s, i) => (s.status === 'rejected' ? [homesOf[i]!] : []));
    expect(live.length).toBeGreaterThan(0);
    // Only the looser one may be refused: refusing the capped one would leave spend above its cap.
    expect(refused.filter((h) => h === homesOf[0])).toEqual([]);
    for (const h of refused) expect(logOf(h)).toMatch(/differ from those of the store .* and are looser/);
    for (const d of live) {
      const account = await d.api<{ money: { max_usd_per_hour: number | null } }>('GET', '/v1/account');
      expect(account.body.money.max_usd_per_hour).toBe(CAP);
    }
    const { waiting } = await submitAndSettle(live, 3);
    expect(waiting).toBeGreaterThan(0);
    expect(peakDph(sim.history())).toBeLessThanOrEqual(CAP + 1e-9);
  }, 120_000);
});
