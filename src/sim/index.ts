// The marketplace simulator: a real HTTP server that behaves like the service (see
// docs/simulator.md). Start it in-process with `startSimulator()`; `berth simulate` wraps it.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { adminRoutes } from './admin-routes.js';
import type { SimOffer } from './catalog.js';
import type { CloudCopy } from './cloud-copies.js';
import { SimClock } from './clock.js';
import {
  parseSimConfig,
  type FaultConfig,
  type FaultProfile,
  type LogsConfig,
  type OfferFault,
  type Permissions,
  type RateLimitConfig,
  type SimConfigInput,
} from './config.js';
import { instanceRecord, type InstanceRecord } from './instance-record.js';
import type { SimInstanceHistory } from './instances.js';
import type { Ledger } from './ledger.js';
import { accountRoutes } from './routes/account.js';
import { addForeignInstances, bulkAdminRoutes, parseBulk } from './routes/admin-bulk.js';
import { billingRoutes } from './routes/billing.js';
import { cloudRoutes } from './routes/cloud.js';
import { instanceRoutes } from './routes/instances.js';
import { instanceSshRoutes } from './routes/instance-ssh.js';
import { logRoutes } from './routes/logs.js';
import { manageRoutes } from './routes/manage.js';
import { recycleRoutes } from './routes/recycle.js';
import { marketRoutes } from './routes/market.js';
import { priceIncreaseRoutes } from './routes/price-increases.js';
import { templateRoutes } from './routes/templates.js';
import { webhookRoutes } from './routes/webhooks.js';
import { createSimServer } from './server.js';
import type { SimStats } from './stats.js';
import type { RateLimitUpdate } from './rate-limiter.js';
import type { Delivery } from './webhooks.js';
import type { PendingRow } from './price-increases.js';
import { SimWorld } from './world.js';

export type { FaultProfile, SimConfigInput } from './config.js';
export { parseSimConfig } from './config.js';
export { FAST_SIM } from './presets.js';
export type { SimInstanceHistory, OnstartResult } from './instances.js';

export type { SimStats } from './stats.js';

export type { SimOffer } from './catalog.js';

export { signWebhook } from './webhooks.js';

export interface SimulatorOptions {
  /** Default 0 (a free port). */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Overrides config.seed (default 1). */
  seed?: number | undefined;
  /** Sim seconds per wall second; overrides config.time_scale (default 1). */
  timeScale?: number | undefined;
  /** The full-access key; default: generated. */
  apiKey?: string | undefined;
  /** Partial sim config; every field has a default. */
  config?: SimConfigInput;
  /** Wall clock in ms; tests may inject one. Default Date.now. */
  now?: () => number;
}

export interface RunningSimulator {
  url: string;
  apiKey: string;
  /** Closes the server, timers, onstart processes and scratch dirs, and pending webhook deliveries. */
  close(): Promise<void>;
  /** Merges fault knobs (`service_stop_after_s` applies to the instances running now too). */
  setFaults(f: Partial<FaultConfig>): FaultConfig;
  /**
   * The service stops the instance `afterS` sim seconds from now (default 0: now), as when the
   * account's credit runs out: intended and actual `stopped`, its container killed, disk billed.
   * False when no live instance has that id.
   */
  serviceStop(instanceId: number, afterS?: number): boolean;
  /** Merges the logs' upload knobs (`upload_delay_s`, `url_ttl_s`), from the next logs request. */
  setLogs(partial: Partial<LogsConfig>): LogsConfig;
  /** Merges rate limits: `enabled`, `count_refused`, and group limits (null turns one off), from the next request. */
  setRateLimits(partial: RateLimitUpdate): RateLimitConfig;
  /** Profile for later creates on this machine (an offer's forced profile wins). */
  setMachineProfile(machineId: number, profile: FaultProfile): void;
  setOfferProfile(offerId: number, profile: FaultProfile): void;
  /** A create-time fault on this offer (`not_your_own`, `unavailable`); null clears it. */
  setOfferFault(offerId: number, fault: OfferFault | null): void;
  /** The host of this machine disconnects now: its live instances go offline. Returns their ids. */
  takeMachineOffline(machineId: number): number[];
  /**
   * Other bidders come (pct > 0) or leave (pct < 0): the machine's minimum bids change by pct
   * percent from now on. Returns the new minimum bids and the instances it outbid.
   */
  raiseMinBid(machineId: number, pct: number): { offers: Array<{ id: number; min_bid: number }>; outbid: number[] };
  /**
   * The instance's host asks `pct` percent more for its compute: a pending price increase the renter
   * may accept or reject. With `cutoverS` (sim seconds) it applies then if unanswered. Null: no such live instance.
   */
  raisePrice(instanceId: number, pct: number, cutoverS?: number): PendingRow | null;
  /** The dropped-session fault: the instance's open SSH connections are cut now. False: no such live instance. */
  sshDropSessions(instanceId: number): boolean;
  /** The host-key fault: the instance's sshd gets a new host key (now if it runs, else at its next start). */
  sshChangeHostKey(instanceId: number): boolean;
  /** The refused-key fault on one instance: its sshd refuses every key (false: as before). */
  sshRefuseKeys(instanceId: number, refuse?: boolean): boolean;
  setTimeScale(scale: number): void;
  /** Every instance ever created, destroyed ones included. */
  history(): SimInstanceHistory[];
  /** Instances accruing any charge now (every instance not yet destroyed). */
  billingNow(): SimInstanceHistory[];
  ledger(): Ledger;
  stats(): SimStats;
  /** Live instances as the service shows them. */
  instances(): InstanceRecord[];
  /** The catalog (rented offers included). */
  offers(): readonly SimOffer[];
  webhookDeliveries(): Delivery[];
  /** Every cloud copy asked for (`POST /api/v0/commands/rclone/`), with its state and bytes written. */
  cloudCopies(): CloudCopy[];
  /**
   * Fills the account with `count` instances berth does not own (labels `<labelPrefix><n>`, default
   * `foreign-`), settled in `status` (default running), each on a free offer. Returns their ids.
   */
  addForeignInstances(
    count: number,
    options?: { labelPrefix?: string; status?: 'running' | 'loading' | 'stopped' | 'exited' | 'unknown' | 'offline' },
  ): number[];
  /** Adds dollars to the account's credit (negative takes them); returns the credit after it. */
  addCredit(usd: number): number;
  /** A new API key; permissions absent: full access. Returns the key value. */
  addKey(permissions?: Permissions, name?: string): string;
  /** Fresh world from the same config: instances, history, stats, keys and faults as at start. */
  reset(): Promise<void>;
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  const base = parseSimConfig(options.config ?? {});
  const config = {
    ...base,
    seed: options.seed ?? base.seed,
    time_scale: options.timeScale ?? base.time_scale,
  };
  const apiKey = options.apiKey ?? randomBytes(24).toString('hex');
  const clock = new SimClock(options.now ?? Date.now, config.time_scale);
  let url = '';
  let world = new SimWorld(config, clock, apiKey, () => url);

  const control = {
    setTimeScale(scale: number) {
      if (!(scale > 0) || !Number.isFinite(scale)) throw new RangeError('time scale must be a positive number');
      world.instances.advanceAll(); // stamp due transitions under the old scale first
      clock.setTimeScale(scale);
    },
    async reset() {
      const old = world;
      world = new SimWorld(config, clock, apiKey, () => url);
      await old.close();
    },
  };

  const server = createSimServer({
    world: () => world,
    apiRoutes: [
      ...marketRoutes,
      ...priceIncreaseRoutes,
      ...instanceRoutes,
      ...instanceSshRoutes,
      ...manageRoutes,
      ...recycleRoutes,
      ...accountRoutes,
      ...templateRoutes,
      ...webhookRoutes,
      ...billingRoutes,
      ...logRoutes,
      ...cloudRoutes,
    ],
    adminRoutes: [...adminRoutes(control), ...bulkAdminRoutes],
    adminEnabled: config.admin,
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  url = `http://${host}:${addr.port}`;

  const ticker = setInterval(() => world.tick(), config.tick_ms);
  ticker.unref();

  let closing: Promise<void> | undefined;
  return {
    url,
    apiKey,
    close() {
      closing ??= (async () => {
        clearInterval(ticker);
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await Promise.all([closed, world.close()]);
      })();
      return closing;
    },
    setFaults: (f) => world.setFaults(f),
    serviceStop: (id, afterS = 0) => {
      if (!(afterS >= 0)) throw new RangeError('afterS must be 0 or more sim seconds');
      return world.serviceStop(id, afterS) !== null;
    },
    setLogs: (partial) => world.logUploads.update(partial),
    setRateLimits: (partial) => world.limiter.update(partial),
    setMachineProfile: (id, p) => world.profiles.setMachine(id, p),
    setOfferProfile: (id, p) => world.profiles.setOffer(id, p),
    setOfferFault: (id, f) => world.profiles.setOfferFault(id, f),
    takeMachineOffline: (id) => world.instances.machineOffline(id).map((i) => i.hist.id),
    raiseMinBid: (id, pct) => {
      if (!(pct > -100)) throw new RangeError('pct must be above -100');
      return world.raiseMinBid(id, pct);
    },
    raisePrice: (id, pct, cutoverS) => {
      if (!(pct > 0)) throw new RangeError('pct must be above 0');
      return world.raisePrice(id, pct, cutoverS ?? null);
    },
    sshDropSessions: (id) => world.instances.get(id) !== undefined && (world.sshListeners.dropSessions(id), true),
    sshChangeHostKey: (id) => {
      const inst = world.instances.get(id);
      if (inst) world.sshListeners.changeHostKey(inst);
      return inst !== undefined;
    },
    sshRefuseKeys: (id, refuse = true) => {
      if (!world.instances.get(id)) return false;
      world.instanceSshKeys.refuseAll(id, refuse);
      return true;
    },
    setTimeScale: control.setTimeScale,
    history: () => world.instances.history(),
    billingNow: () => world.instances.liveHistories(),
    ledger: () => world.ledger(),
    stats: () => world.stats,
    instances: () => {
      world.syncMinBids();
      return world.instances.list().map(instanceRecord);
    },
    offers: () => {
      world.syncMinBids();
      return world.catalog.offers;
    },
    webhookDeliveries: () => world.webhooks.deliveries(),
    cloudCopies: () => world.cloud.list(),
    addCredit: (usd) => world.addCredit(usd),
    addForeignInstances: (count, o = {}) => addForeignInstances(world, parseBulk({ count, label_prefix: o.labelPrefix, status: o.status })),
    addKey: (permissions, name = '') => world.keys.create(name, permissions ?? null).key,
    reset: control.reset,
  };
}
