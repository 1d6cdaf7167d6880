// Everything one simulated account and marketplace holds, built from one config and seed. A reset
// throws the world away and builds a fresh one; the server and clock stay.
// The world reacts to instance transitions here (onstart, events, freeing offers) so that the
// stores stay unaware of each other.
import { SecretStore, SshKeyStore } from './account.js';
import { ApiKeyStore } from './api-keys.js';
import { Catalog } from './catalog.js';
import type { SimClock } from './clock.js';
import type { SimConfig } from './config.js';
import { FaultInjector } from './faults.js';
import { InstanceStore, type LiveInstance } from './instances.js';
import { LogUploads } from './log-uploads.js';
import { computeLedger, totalBilled, type Ledger } from './ledger.js';
import type { ActualStatus } from './lifecycle.js';
import { OnstartRunner } from './onstart-runner.js';
import { ProfileBook } from './profiles.js';
import { RateLimiter } from './rate-limiter.js';
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
  readonly logUploads: LogUploads;
  readonly stats: SimStats = emptyStats();
  /** Set once `client:low_credit` is sent; cleared when credit climbs back above the threshold. */
  private lowCreditSent = false;
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
    this.sshListeners = new SshListeners(config.ssh_listeners, clock);
    this.logUploads = new LogUploads(config.logs, clock);
    this.instances = new InstanceStore(clock, config.lifecycle, seed, {
      onStatus: (inst, status) => this.onStatus(inst, status),
      onDestroyed: (inst) => {
        this.catalog.release(inst.offer.id, inst.hist.id);
        this.onstart.forget(inst.hist.id);
        this.sshListeners.close(inst.hist.id);
      },
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

  /** Periodic work that no request triggers: due transitions, the low-credit event, webhook retries. */
  tick(): void {
    this.instances.advanceAll();
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
    this.webhooks.tick();
  }

  /** A change of bid left the instance below the minimum bid: `client:outbid`. */
  notifyOutbid(inst: LiveInstance): void {
    this.webhooks.emit('client:outbid', {
      subject: `Instance ${inst.hist.id} was outbid`,
      message: `Instance ${inst.hist.id}${labelText(inst)} was stopped: its bid is below the current minimum bid of $${inst.offer.min_bid}/h.`,
    });
  }

  async close(): Promise<void> {
    await Promise.all([this.onstart.close(), this.webhooks.close(), this.sshListeners.closeAll()]);
  }

  private onStatus(inst: LiveInstance, status: ActualStatus): void {
    const id = inst.hist.id;
    const what = `Instance ${id}${labelText(inst)} on machine ${inst.hist.machine_id}`;
    // SSH answers only while running: any other status closes the listeners.
    if (status === 'running') this.sshListeners.open(inst);
    else this.sshListeners.close(id);
    if (status === 'running') {
      this.onstart.maybeRun(inst);
      this.webhooks.emit('client:instance_started', { subject: `Instance ${id} started`, message: `${what} is running.` });
    } else if (status === 'offline') {
      this.webhooks.emit('host:machine_offline', { subject: `Machine ${inst.hist.machine_id} is offline`, message: `${what} is offline: the host disconnected.` });
    } else if (status === 'stopped') {
      this.onstart.stop(id);
      this.webhooks.emit('client:instance_stopped', { subject: `Instance ${id} stopped`, message: `${what} is stopped.` });
    }
  }
}

const round2 = (x: number) => Math.round(x * 100) / 100;
const labelText = (inst: LiveInstance) => (inst.hist.label ? ` (${inst.hist.label})` : '');
