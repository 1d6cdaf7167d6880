// Everything one simulated account and marketplace holds, built from one config and seed. A reset
// throws the world away and builds a fresh one; the server and clock stay.
// The world reacts to instance transitions here (onstart, events, freeing offers) so that the
// stores stay unaware of each other.
import { SecretStore, SshKeyStore } from './account.js';
import { ApiKeyStore } from './api-keys.js';
import { Catalog } from './catalog.js';
import { CloudCopies, copyFaultDice } from './cloud-copies.js';
import type { SimClock } from './clock.js';
import type { FaultConfig, SimConfig } from './config.js';
import { FaultInjector } from './faults.js';
import { InstanceStore, type LiveInstance } from './instances.js';
import { LogUploads } from './log-uploads.js';
import { Market } from './market.js';
import { computeLedger, totalBilled, type Ledger } from './ledger.js';
import type { ActualStatus } from './lifecycle.js';
import { OnstartRunner } from './onstart-runner.js';
import { PriceIncreases, type PendingRow } from './price-increases.js';
import { ProfileBook } from './profiles.js';
import { RateLimiter } from './rate-limiter.js';
import { InstanceSshKeys } from './ssh-keys.js';
import { SshListeners } from './ssh-listeners.js';
import { emptyStats, type SimStats } from './stats.js';
import { TemplateStore } from './templates.js';
import { WebhookStore } from './webhooks.js';

export class SimWorld {
  readonly catalog: Catalog;
  readonly profiles: ProfileBook;
  readonly faults: FaultInjector;
  readonly limiter: RateLimiter;
  readonly keys: ApiKeyStore;
  readonly instances: InstanceStore;
  readonly secrets = new SecretStore();
  readonly sshKeys: SshKeyStore;
  readonly templates: TemplateStore;
  readonly webhooks: WebhookStore;
  readonly onstart: OnstartRunner;
  readonly sshListeners: SshListeners;
  /** Each instance's authorized keys and host key (ssh-keys.ts). */
  readonly instanceSshKeys = new InstanceSshKeys();
  readonly logUploads: LogUploads;
  readonly market: Market;
  readonly priceIncreases = new PriceIncreases();
  /** The account's cloud connections and the cloud copies under way (cloud-copies.ts). */
  readonly cloud: CloudCopies;
  readonly stats: SimStats = emptyStats();
  /** Set once `client:low_credit` is sent; cleared when credit climbs back above the threshold. */
  private lowCreditSent = false;
  /** Sim moment the catalog's minimum bids were last brought up to date (-1: never). */
  private minBidsSynced = -1;
  /** Dollars added (or taken) since start, by the admin route: a top-up. */
  private creditAdded = 0;

  constructor(
    readonly config: SimConfig,
    readonly clock: SimClock,
    apiKey: string,
    /** The simulator's own base URL (for URLs it hands out). */
    readonly simUrl: () => string,
  ) {
    const seed = config.seed;
    const unixNow = () => Math.floor(clock.wallMs() / 1000);
    this.catalog = new Catalog(seed, config.catalog.size);
    this.profiles = new ProfileBook(seed, config.profile_rates, config.machine_profiles, config.offer_profiles, config.offer_faults);
    this.faults = new FaultInjector(seed, config.faults);
    this.limiter = new RateLimiter(config.rate_limits, () => clock.wallMs());
    this.keys = new ApiKeyStore(unixNow);
    this.keys.add(apiKey, 'full access', null);
    for (const k of config.keys) this.keys.add(k.key, k.name ?? '', k.permissions ?? null);
    this.sshKeys = new SshKeyStore(config.account.user_id, () => clock.wallMs());
    for (const k of config.account.ssh_keys) this.sshKeys.add(k);
    this.templates = new TemplateStore(unixNow);
    this.webhooks = new WebhookStore(config.account.user_id, clock, config.webhooks);
    for (const w of config.webhooks.initial) this.webhooks.create(w.name, w.webhook_url, w.event_types, w.webhook_secret);
    this.onstart = new OnstartRunner(config.onstart_exec, clock, simUrl);
    this.sshListeners = new SshListeners(config.ssh_listeners, clock, {
      keys: this.instanceSshKeys,
      container: (inst) => this.onstart.container(inst),
      faults: () => {
        const f = this.faults.current();
        return { refuseKeys: f.ssh_refuse_keys, dropAfterMs: f.ssh_drop_after_ms };
      },
    });
    this.logUploads = new LogUploads(config.logs, clock);
    this.market = new Market(seed, config.bids, this.catalog.offers);
    this.instances = new InstanceStore(clock, config.lifecycle, seed, this.market, {
      onStatus: (inst, status) => this.onStatus(inst, status),
      onDestroyed: (inst) => {
        this.catalog.release(inst.offer.id, inst.hist.id);
        this.onstart.forget(inst.hist.id);
        this.sshListeners.forget(inst.hist.id);
      },
    });
    this.cloud = new CloudCopies(config.cloud, {
      clock,
      instances: this.instances,
      dirOf: (inst) => this.onstart.container(inst).dir,
      failHalfway: copyFaultDice(seed, () => this.faults.current().cloud_copy_fail_rate),
    });
  }

  ledger(): Ledger {
    return computeLedger(this.instances.history(), this.clock.stamp());
  }

  /** The account's credit now: the starting credit plus top-ups, less everything billed. */
  credit(): number {
    return this.config.account.credit + this.creditAdded - totalBilled(this.instances.history(), this.clock.simS());
  }

  /** A top-up (or, negative, a charge outside the ledger). Returns the credit after it. */
  addCredit(usd: number): number {
    this.creditAdded += usd;
    return this.credit();
  }

  /**
   * Merges fault knobs. A new `service_stop_after_s` applies to the instances running now too,
   * counted from when they started running (and never before now).
   */
  setFaults(partial: Parameters<FaultInjector['update']>[0]): FaultConfig {
    const before = this.faults.current().service_stop_after_s;
    const after = this.faults.update(partial);
    if (after.service_stop_after_s !== before) {
      for (const inst of this.instances.list()) {
        inst.serviceStops = inst.serviceStops.filter((st) => !st.whileRunning);
        if (inst.status === 'running') this.armServiceStop(inst, true);
      }
    }
    return after;
  }

  /**
   * The service stops the instance `afterS` sim seconds from now, whatever its status then (the
   * moment the account's credit runs out). Null when no live instance has that id.
   */
  serviceStop(instanceId: number, afterS: number): LiveInstance | null {
    const inst = this.instances.get(instanceId);
    if (!inst) return null;
    this.instances.scheduleServiceStop(inst, this.clock.simS() + afterS, false);
    return inst;
  }

  /** Periodic work that no request triggers: due transitions, the low-credit event, webhook retries. */
  tick(): void {
    this.syncMinBids();
    this.instances.advanceAll();
    this.cloud.tick();
    const credit = this.credit();
    const threshold = this.config.account.low_credit_threshold;
    if (credit < threshold && !this.lowCreditSent) {
      this.lowCreditSent = true;
      this.webhooks.emit('client:low_credit', {
        subject: 'Warning - Your Vast.ai Credit Balance Is Getting Low',
        message: `Your Vast.ai balance ($${round2(credit).toFixed(2)}) is below your configured threshold ($${threshold.toFixed(2)}).`,
      });
    } else if (credit >= threshold) {
      this.lowCreditSent = false;
    }
    for (const due of this.priceIncreases.due(this.clock.simS())) {
      const inst = this.instances.get(due.contractId);
      if (inst) this.instances.setComputePrice(inst, due.newDph);
    }
    this.webhooks.tick();
  }

  /**
   * The host of the instance asks `pct` percent more for its compute. With `cutoverS` (sim seconds),
   * the increase applies then if still unanswered; without, only an accept applies it.
   */
  raisePrice(instanceId: number, pct: number, cutoverS: number | null): PendingRow | null {
    const inst = this.instances.get(instanceId);
    if (!inst) return null;
    const at = cutoverS === null ? null : this.clock.simS() + cutoverS;
    return this.priceIncreases.raise(inst, pct, Math.floor(this.clock.wallMs() / 1000), at);
  }

  /** Accepts (the new price applies now) or rejects a pending increase; null when none is pending by that id. */
  answerPriceIncrease(id: number, answer: 'accept' | 'reject'): PendingRow | null {
    const done = this.priceIncreases.answer(id, answer);
    if (!done) return null;
    const inst = this.instances.get(done.row.contract_id);
    if (answer === 'accept' && inst) this.instances.setComputePrice(inst, done.newDph);
    return done.row;
  }

  /**
   * The machine's minimum bids rise (or fall) by `pct` percent from now on, as if other bidders
   * came (or left). Returns the offers' new minimum bids and the instances outbid by it.
   */
  raiseMinBid(machineId: number, pct: number): { offers: Array<{ id: number; min_bid: number }>; outbid: number[] } {
    // Everything up to now first, under the old minimum; then the raise, from now on.
    const onMachine = this.instances.list().filter((i) => i.hist.machine_id === machineId);
    const before = new Set(onMachine.filter((i) => i.outbid).map((i) => i.hist.id));
    const now = this.clock.simS();
    this.market.raise(machineId, now, pct);
    // Directly: a sync already done at this very moment would not see a step at it again.
    for (const o of this.catalog.offersOf(machineId)) this.catalog.setMinBid(o.id, this.market.minBid(o, now));
    const outbid: number[] = [];
    for (const inst of onMachine) {
      this.instances.rebid(inst);
      if (inst.outbid && !before.has(inst.hist.id)) outbid.push(inst.hist.id);
    }
    return { offers: this.catalog.offersOf(machineId).map((o) => ({ id: o.id, min_bid: o.min_bid })), outbid };
  }

  /** Brings the catalog's `min_bid` (search, records) to the market's values now. */
  syncMinBids(): void {
    const now = this.clock.simS();
    const from = this.minBidsSynced;
    this.minBidsSynced = now;
    const machines = this.market.hasDefault ? this.catalog.machineIds() : this.market.movingMachines();
    for (const m of machines) {
      if (from >= 0 && this.market.stepsBetween(m, from, now).length === 0) continue;
      for (const o of this.catalog.offersOf(m)) this.catalog.setMinBid(o.id, this.market.minBid(o, now));
    }
  }

  async close(): Promise<void> {
    await this.cloud.close();
    await Promise.all([this.onstart.close(), this.webhooks.close(), this.sshListeners.closeAll()]);
  }

  /**
   * With `service_stop_after_s`, the instance (running now) is stopped by the service that many sim
   * seconds after it started running. `late`: the knob was set while it ran, so never before now.
   */
  private armServiceStop(inst: LiveInstance, late: boolean): void {
    const after = this.faults.current().service_stop_after_s;
    if (after === null) return;
    const since = [...inst.hist.statuses].reverse().find((s) => s.status === 'running')!.at.sim_s;
    const at = since + after;
    if (late) this.instances.scheduleServiceStop(inst, at, true);
    else inst.serviceStops.push({ at, whileRunning: true }); // inside the store's advance: applied in time order
  }

  private onStatus(inst: LiveInstance, status: ActualStatus): void {
    const id = inst.hist.id;
    const what = `Instance ${id}${labelText(inst)} on machine ${inst.hist.machine_id}`;
    // SSH answers only while running: any other status closes the listeners.
    if (status === 'running') this.sshListeners.open(inst);
    else this.sshListeners.close(id);
    if (status === 'rebooting' || status === 'exited') this.onstart.stop(id);
    if (status === 'recycling') {
      // The container is removed (recycle_instance.yaml): its script, files and log go with it,
      // and its sshd's host key unless the quirk keeps it (a new container's sshd makes new keys).
      this.onstart.recycled(id);
      if (!this.config.quirks.recycle_keeps_host_key) this.instanceSshKeys.changeHostKey(id);
    }
    if (status === 'running') {
      this.armServiceStop(inst, false);
      this.onstart.maybeRun(inst);
      this.webhooks.emit('client:instance_started', { subject: `Instance ${id} started`, message: `${what} is running.` });
    } else if (status === 'offline') {
      // The renter's event ("your instance went down because of a problem on the host machine");
      // host:machine_offline goes to the machine's host, not to this account.
      this.webhooks.emit('client:instance_offline', {
        subject: `Instance ${id} is offline`,
        message: `${what} went down because of a problem on the host machine.`,
      });
    } else if (status === 'stopped') {
      // Every way out of running (a stop, an outbid, a reboot, an exit) ends the container, and
      // the script with it; the next start runs it again from the beginning.
      this.onstart.stop(id);
      if (inst.outbid) {
        this.webhooks.emit('client:outbid', {
          subject: `Instance ${id} was outbid`,
          message: `${what} was stopped: its bid of $${inst.hist.compute_dph}/h is below the current minimum bid of $${this.market.minBid(inst.offer, this.clock.simS())}/h.`,
        });
      } else {
        this.webhooks.emit('client:instance_stopped', { subject: `Instance ${id} stopped`, message: `${what} is stopped.` });
      }
    }
  }
}

const round2 = (x: number) => Math.round(x * 100) / 100;
const labelText = (inst: LiveInstance) => (inst.hist.label ? ` (${inst.hist.label})` : '');
