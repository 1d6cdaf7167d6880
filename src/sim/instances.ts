// The account's instances and the history of every instance ever created.
//
// A live instance follows its plan (lifecycle.ts) from the start of its current phase. `advance`
// applies the steps whose time has come, stamping each at its exact planned sim moment, and tells
// the world through `onStatus`; it runs on every read and on the world's tick. A stop freezes the
// plan in `stopped`; a start, a reboot or a recycle begins a new phase; a destroy stamps `destroyed_at`, frees
// the offer and forgets the instance key. History records outlive the instances; a bid change is
// recorded on them so the ledger bills each hour at its own price.
//
// An interruptible (bid) instance that wants to run is either contending or outbid:
//   contending → outbid   its bid falls below the offer's minimum bid (market.ts moved it, or a bid
//                         change lowered the bid): `stopped` at that exact moment, intended_status
//                         still `running`, the outbid status_msg; disk keeps billing;
//   outbid → contending   the minimum bid is back at or below its bid (the market fell, or a bid
//                         change raised the bid): a new phase from that moment, loading → running.
// A bid below the minimum at create time starts outbid. A user's stop ends either state.
//
// The service stops an instance by itself as when the account's credit runs out (billing.mdx: "Your
// instances are stopped automatically ... you will continue to be billed for disk storage"): a
// `serviceStop` due at a sim moment stops it then, intended and actual, like a user's stop.
//
// A recycle (recycle_instance.yaml: "Destroys and recreates container in place (from newly pulled
// image) without losing GPU priority") keeps the instance (id, contract, machine, price, ports) and
// makes its container again: `recycling`, then loading and running, from the image, onstart and
// args an update_template left pending (applied now) or the ones it had. Its load takes the
// machine's first pull of the image (boot_s + first_pull_s) or, once the machine has the image,
// cached_boot_s (image-cache.ts); a create's first load alike.
import type { SimOffer } from './catalog.js';
import type { SimClock, SimTime } from './clock.js';
import type { FaultProfile, SimConfig } from './config.js';
import {
  doubleBoughtPlan,
  missingImageMessage,
  planFor,
  rebootPlan,
  recyclePlan,
  STATUS_MSG,
  withDetour,
  type ActualStatus,
  type InstanceTimings,
  type Step,
} from './lifecycle.js';
import { ImageCache } from './image-cache.js';
import { splitImage } from './image-name.js';
import { diskDph } from './pricing.js';
import { newKeyValue } from './api-keys.js';
import type { Market } from './market.js';
import { between, hashUnit, mulberry32, pick } from './prng.js';

interface StatusEntry {
  status: ActualStatus;
  at: SimTime;
  msg: string;
}

export interface OnstartResult {
  /** Which run of the script this was: 1 at the first boot, one more at each container start after. */
  run: number;
  exit_code: number | null;
  signal: string | null;
  timed_out: boolean;
  stdout: string;
  stderr: string;
  /** Output past the configured cap was cut. */
  truncated: boolean;
  started_at: SimTime;
  ended_at: SimTime;
}

export interface SimInstanceHistory {
  id: number;
  offer_id: number;
  machine_id: number;
  host_id: number;
  label: string | null;
  image: string;
  /** Numeric id of the template it was created from, if any (the charges' metadata). */
  template_id: number | null;
  profile: FaultProfile;
  is_bid: boolean;
  /** $/h billed while loading, running or rebooting (the current price). */
  compute_dph: number;
  /** Every compute price with the moment it took effect, the first at creation. */
  compute_dph_changes: Array<{ at: SimTime; dph: number }>;
  /** $/h billed for the disk from creation to destroy. */
  disk_dph: number;
  created_at: SimTime;
  destroyed_at: SimTime | null;
  statuses: StatusEntry[];
  /** The latest run of the onstart script that ended (onstart execution on); null before. */
  onstart: OnstartResult | null;
  /** Runs of the onstart script started so far: one per container start. */
  onstart_runs: number;
}

export interface CreateParams {
  image: string;
  disk: number;
  label: string | null;
  /** The container's environment variables (onstart sees them). */
  env: Record<string, string>;
  /** `extra_env` as the service shows it: every env entry, `-p` port entries included. */
  envPairs: Array<[string, string]>;
  onstart: string;
  args: string[];
  runtype: string;
  template_hash_id: string | null;
  template_id: number | null;
  /** Bid price in $/h, null for on-demand. */
  price: number | null;
  /** Extra container ports from `-p` entries of env, e.g. "8080/tcp". */
  ports: string[];
}

/**
 * What an update_template changed and the next recycle applies (the preview spec: the update sets
 * the instance's template; a recycle "re-provisions it from its template"). `env` only with
 * quirks.update_env_applies.
 */
export type PendingTemplate = Partial<
  Pick<CreateParams, 'image' | 'onstart' | 'args' | 'env' | 'envPairs' | 'template_hash_id' | 'template_id'>
>;

/** Loopback ports of an instance's SSH listeners (ssh-listeners.ts). */
export interface SshPorts {
  proxyPort: number;
  directPort: number;
}

export interface LiveInstance {
  readonly hist: SimInstanceHistory;
  readonly offer: SimOffer;
  /** What its container was made from: a recycle replaces it with the pending template applied. */
  params: CreateParams;
  readonly apiKey: string;
  /** Drawn at creation; a recycle to another image redoes its pull error. */
  timings: InstanceTimings;
  /** An update_template's changes, waiting for the next recycle; null when none. */
  pending: PendingTemplate | null;
  /** Loopback ports of its SSH listeners (ssh_listeners on), shown in the record; null otherwise. */
  readonly sshPorts: SshPorts | null;
  intended: 'running' | 'stopped';
  /** A bid instance stopped because its bid loses (intended stays running); it resumes when it wins. */
  outbid: boolean;
  /** Its onstart script (a task) runs now: the GPU is busy (gpu_util in its record). */
  gpuBusy: boolean;
  /** Sim moment up to which market moves have been applied to it. */
  marketSeen: number;
  /**
   * Moments (sim) the service stops it, as when credit runs out; `whileRunning`: only if it is still
   * running then (the per-run fault), dropped when it leaves running before.
   */
  serviceStops: Array<{ at: number; whileRunning: boolean }>;
  phaseStart: number;
  plan: Step[];
  next: number;
  status: ActualStatus;
  msg: string;
  /**
   * Lines the host writes into the status bar at a sim moment without a change of status (a cloud
   * copy's progress, cloud-copies.ts), in time order: each becomes `msg` at its moment, and a later
   * transition's message replaces it.
   */
  notes: Array<{ at: number; msg: string }>;
}

export interface InstanceHooks {
  onStatus(inst: LiveInstance, status: ActualStatus): void;
  onDestroyed(inst: LiveInstance): void;
}

export class InstanceStore {
  private readonly live = new Map<number, LiveInstance>();
  private readonly byKey = new Map<string, number>();
  private readonly all: SimInstanceHistory[] = [];
  /** Which images each machine has pulled (image-cache.ts). */
  private readonly images = new ImageCache();
  private nextId: number;
  private readonly idRng;

  constructor(
    private readonly clock: SimClock,
    private readonly lifecycle: SimConfig['lifecycle'],
    private readonly seed: number,
    private readonly market: Market,
    private readonly hooks: InstanceHooks,
  ) {
    this.idRng = mulberry32(seed ^ 0x1d5);
    this.nextId = 9_400_000 + Math.floor(this.idRng() * 100_000);
  }

  /**
   * `detour`: statuses it shows before it loads (faults.boot_detour), none by default.
   * `lostDoubleBuy`: another create on its offer won (faults.double_buy_rate): it never fully starts.
   */
  create(
    offer: SimOffer,
    params: CreateParams,
    profile: FaultProfile,
    sshPorts: SshPorts | null = null,
    opts: { detour?: ReadonlyArray<{ status: string | null; s: number }>; lostDoubleBuy?: 'port_error' | 'silent' | null } = {},
  ): LiveInstance {
    const inst = this.make(offer, params, profile, sshPorts);
    if (opts.lostDoubleBuy) inst.plan = doubleBoughtPlan(inst.timings, opts.lostDoubleBuy);
    inst.plan = withDetour(inst.plan, opts.detour ?? [], inst.timings.provision_s);
    const now = inst.phaseStart;
    // A bid that loses now waits, stopped, for the machine (create_instance.yaml: interruptibles
    // default to cancel_unavail false, so they are created even when they cannot start now).
    if (this.losing(inst, now)) this.loseBid(inst, now, STATUS_MSG.bidTooLow);
    this.advance(inst);
    return inst;
  }

  /**
   * An instance that was already there, settled in `status` for good (no plan, no hooks: no
   * events, listeners or onstart). The admin bulk route fills an account with these.
   */
  createSettled(
    offer: SimOffer,
    params: CreateParams,
    status: 'running' | 'loading' | 'stopped' | 'exited' | 'unknown' | 'offline',
  ): LiveInstance {
    const inst = this.make(offer, params, 'healthy', null);
    inst.plan = [];
    if (status === 'stopped') inst.intended = 'stopped';
    const msg = status === 'loading' ? STATUS_MSG.loading : status === 'running' ? STATUS_MSG.running : STATUS_MSG[status];
    inst.status = status;
    inst.msg = msg;
    inst.hist.statuses.push({ status, at: inst.hist.created_at, msg });
    return inst;
  }

  private make(offer: SimOffer, params: CreateParams, profile: FaultProfile, sshPorts: SshPorts | null): LiveInstance {
    this.nextId += 1 + Math.floor(this.idRng() * 20);
    const id = this.nextId;
    const now = this.clock.simS();
    const timings = this.drawTimings(id, params.image);
    const firstLoadS = this.loadTime(offer.machine_id, params.image, timings);
    const computeDph = params.price ?? offer.dph_base;
    const created = this.clock.stampAtSim(now);
    const hist: SimInstanceHistory = {
      id,
      offer_id: offer.id,
      machine_id: offer.machine_id,
      host_id: offer.host_id,
      label: params.label,
      image: params.image,
      template_id: params.template_id,
      profile,
      is_bid: params.price !== null,
      compute_dph: computeDph,
      compute_dph_changes: [{ at: created, dph: computeDph }],
      disk_dph: diskDph(params.disk, offer.storage_cost),
      created_at: created,
      destroyed_at: null,
      statuses: [],
      onstart: null,
      onstart_runs: 0,
    };
    const inst: LiveInstance = {
      hist,
      offer,
      params,
      apiKey: newKeyValue(),
      timings,
      pending: null,
      sshPorts,
      intended: 'running',
      outbid: false,
      gpuBusy: false,
      marketSeen: now,
      serviceStops: [],
      phaseStart: now,
      plan: planFor(profile, { ...timings, boot_s: firstLoadS }, false, this.lifecycle.restart_s),
      next: 0,
      status: null,
      msg: '',
      notes: [],
    };
    this.all.push(hist);
    this.live.set(id, inst);
    this.byKey.set(inst.apiKey, id);
    return inst;
  }

  /** The live instance, advanced to now; undefined once destroyed or never made. */
  get(id: number): LiveInstance | undefined {
    const inst = this.live.get(id);
    if (inst) this.advance(inst);
    return inst;
  }

  /** Live instances by id, advanced to now. */
  list(): LiveInstance[] {
    const out = [...this.live.values()];
    for (const inst of out) this.advance(inst);
    return out.sort((a, b) => a.hist.id - b.hist.id);
  }

  ownerOfKey(key: string): number | undefined {
    return this.byKey.get(key);
  }

  stop(inst: LiveInstance, msg: string = STATUS_MSG.stopped): void {
    this.advance(inst);
    if (inst.intended === 'stopped') return;
    inst.intended = 'stopped';
    inst.plan = [];
    inst.next = 0;
    if (inst.outbid) {
      // Already stopped by the market: only the intent changes.
      inst.outbid = false;
      inst.msg = msg;
      return;
    }
    this.enter(inst, 'stopped', msg, this.clock.simS());
  }

  /**
   * Starts a stopped instance; a running or outbid one is left as it is. A bid that loses now is
   * left stopped as outbid, to resume when it wins. Returns whether it is starting.
   */
  start(inst: LiveInstance): boolean {
    this.advance(inst);
    if (inst.intended === 'running' && inst.status !== 'stopped') return true;
    if (inst.outbid) return false;
    inst.intended = 'running';
    const now = this.clock.simS();
    inst.marketSeen = now;
    if (this.losing(inst, now)) {
      inst.outbid = true;
      inst.msg = STATUS_MSG.outbid;
      return false;
    }
    this.resume(inst, now);
    this.advance(inst);
    return true;
  }

  /** docker stop + start on the host: `rebooting`, then loading and running again (same profile). */
  reboot(inst: LiveInstance): void {
    this.advance(inst);
    inst.phaseStart = this.clock.simS();
    inst.plan = rebootPlan(inst.hist.profile, inst.timings, this.lifecycle.reboot_s, this.lifecycle.restart_s);
    inst.next = 0;
    this.advance(inst);
  }

  /**
   * The container is removed and made again (recycle_instance.yaml): the pending template applied,
   * `recycling` for recycle_s, then loading (first pull or cached) and running by its profile.
   */
  recycle(inst: LiveInstance): void {
    this.advance(inst);
    if (inst.pending) {
      const image = inst.pending.image ?? inst.params.image;
      inst.params = { ...inst.params, ...inst.pending };
      inst.pending = null;
      inst.hist.image = image;
      inst.hist.template_id = inst.params.template_id;
      inst.timings = { ...inst.timings, pull_error: this.pullError(image) };
    }
    const loadS = this.loadTime(inst.hist.machine_id, inst.params.image, inst.timings);
    inst.phaseStart = this.clock.simS();
    inst.plan = recyclePlan(inst.hist.profile, inst.timings, this.lifecycle.recycle_s, loadS);
    inst.next = 0;
    this.advance(inst);
  }

  /** An update_template: its changes wait for the next recycle (merged with any earlier pending ones). */
  setPending(inst: LiveInstance, changes: PendingTemplate): void {
    inst.pending = { ...inst.pending, ...changes };
  }

  /** A new bid from now on: below the minimum bid the instance is outbid, at or above it an outbid one resumes. */
  changeBid(inst: LiveInstance, price: number): void {
    this.advance(inst);
    inst.hist.compute_dph = price;
    inst.hist.compute_dph_changes.push({ at: this.clock.stamp(), dph: price });
    this.rebid(inst);
  }

  /** The host's new compute price from now on (an accepted or applied price increase). */
  setComputePrice(inst: LiveInstance, dph: number): void {
    this.advance(inst);
    inst.hist.compute_dph = dph;
    inst.hist.compute_dph_changes.push({ at: this.clock.stamp(), dph });
  }

  /** Applies the market's moves up to now, and its state now (after a hand raise of the minimum bid). */
  rebid(inst: LiveInstance): void {
    this.advance(inst);
    const now = this.clock.simS();
    if (this.flips(inst, now)) this.flip(inst, now);
  }

  destroy(inst: LiveInstance): void {
    this.advance(inst);
    inst.hist.destroyed_at = this.clock.stamp();
    this.live.delete(inst.hist.id);
    this.byKey.delete(inst.apiKey);
    this.hooks.onDestroyed(inst);
  }

  /**
   * The service stops the instance at sim moment `at` (now or later; never before now), as when the
   * account's credit runs out. `whileRunning`: only if it is running then.
   */
  scheduleServiceStop(inst: LiveInstance, at: number, whileRunning: boolean): void {
    this.advance(inst);
    inst.serviceStops.push({ at: Math.max(at, this.clock.simS()), whileRunning });
    this.advance(inst);
  }

  /** The host writes `msg` into the instance's status bar at sim moment `at` (now or later). */
  note(inst: LiveInstance, at: number, msg: string): void {
    this.advance(inst);
    const when = Math.max(at, this.clock.simS());
    const i = inst.notes.findIndex((n) => n.at > when);
    inst.notes.splice(i === -1 ? inst.notes.length : i, 0, { at: when, msg });
    this.advance(inst);
  }

  /** The host of `machineId` disconnects: its live instances go offline now and stay there. */
  machineOffline(machineId: number): LiveInstance[] {
    const hit = this.list().filter((i) => i.hist.machine_id === machineId && i.status !== 'offline');
    for (const inst of hit) {
      inst.plan = [];
      inst.next = 0;
      this.enter(inst, 'offline', STATUS_MSG.offline, this.clock.simS());
    }
    return hit;
  }

  advanceAll(): void {
    for (const inst of this.live.values()) this.advance(inst);
  }

  history(): SimInstanceHistory[] {
    this.advanceAll();
    return this.all;
  }

  liveHistories(): SimInstanceHistory[] {
    return this.list().map((i) => i.hist);
  }

  /** Applies plan steps and market moves up to now, in time order, each at its own moment. */
  private advance(inst: LiveInstance): void {
    const now = this.clock.simS();
    for (;;) {
      const step = inst.plan[inst.next];
      const planAt = step ? inst.phaseStart + step.at : Infinity;
      const until = Math.min(now, planAt);
      const flipAt = this.nextFlip(inst, until);
      const stop = firstStop(inst);
      const note = inst.notes[0];
      if (note && note.at <= until && note.at <= (flipAt ?? until) && (!stop || note.at < stop.at)) {
        inst.notes.shift();
        inst.msg = note.msg;
        continue;
      }
      if (stop && stop.at <= (flipAt ?? until)) {
        this.serviceStopNow(inst, stop);
        continue;
      }
      if (flipAt !== undefined) {
        this.flip(inst, flipAt);
        continue;
      }
      inst.marketSeen = Math.max(inst.marketSeen, until);
      if (!step || planAt > now) break;
      inst.next++;
      this.enter(inst, step.status, step.msg, planAt);
    }
  }

  /** The first market move in (marketSeen, until] that outbids the instance or lets it resume. */
  private nextFlip(inst: LiveInstance, until: number): number | undefined {
    if (!inst.hist.is_bid || inst.intended !== 'running' || until <= inst.marketSeen) return undefined;
    for (const t of this.market.stepsBetween(inst.hist.machine_id, inst.marketSeen, until)) {
      if (this.flips(inst, t)) return t;
    }
    return undefined;
  }

  private flips(inst: LiveInstance, t: number): boolean {
    if (!inst.hist.is_bid || inst.intended !== 'running') return false;
    if (inst.outbid) return !this.losing(inst, t);
    return contending(inst.status) && this.losing(inst, t);
  }

  private flip(inst: LiveInstance, t: number): void {
    inst.marketSeen = t;
    if (inst.outbid) this.resume(inst, t);
    else this.loseBid(inst, t, STATUS_MSG.outbid);
  }

  private losing(inst: LiveInstance, t: number): boolean {
    return inst.hist.is_bid && inst.hist.compute_dph < this.market.minBid(inst.offer, t);
  }

  private loseBid(inst: LiveInstance, t: number, msg: string): void {
    inst.plan = [];
    inst.next = 0;
    inst.outbid = true;
    this.enter(inst, 'stopped', msg, t);
  }

  /** A new phase from sim moment `t`: loading for restart_s, then running (per its profile). */
  private resume(inst: LiveInstance, t: number): void {
    inst.outbid = false;
    inst.phaseStart = t;
    inst.plan = planFor(inst.hist.profile, inst.timings, true, this.lifecycle.restart_s);
    inst.next = 0;
  }

  /** A due service stop: stopped at `t` for good (intended too), unless it no longer applies. */
  private serviceStopNow(inst: LiveInstance, stop: { at: number; whileRunning: boolean }): void {
    inst.serviceStops = inst.serviceStops.filter((s) => s !== stop);
    const t = stop.at;
    if (inst.intended === 'stopped' || (stop.whileRunning && inst.status !== 'running')) return;
    inst.intended = 'stopped';
    inst.plan = [];
    inst.next = 0;
    inst.marketSeen = Math.max(inst.marketSeen, t);
    if (inst.outbid) {
      // Already stopped by the market: only the intent changes.
      inst.outbid = false;
      inst.msg = STATUS_MSG.serviceStop;
      return;
    }
    this.enter(inst, 'stopped', STATUS_MSG.serviceStop, t);
  }

  private enter(inst: LiveInstance, status: ActualStatus, msg: string, atSim: number): void {
    if (status !== 'stopped') inst.outbid = false;
    // Running means its image was pulled there: the machine has it from now on.
    if (status === 'running') this.images.add(inst.hist.machine_id, inst.params.image);
    if (status !== 'running') inst.serviceStops = inst.serviceStops.filter((s) => !s.whileRunning);
    inst.status = status;
    inst.msg = msg;
    inst.hist.statuses.push({ status, at: this.clock.stampAtSim(atSim), msg });
    this.hooks.onStatus(inst, status);
  }

  /**
   * Sim seconds of `loading` for a new container of `image` on the machine: cached_boot_s when the
   * machine has pulled it (and the cache is on), else the drawn boot_s plus first_pull_s. The
   * machine's instances are brought up to now first, so that a pull finished by now counts.
   */
  private loadTime(machineId: number, image: string, t: InstanceTimings): number {
    const { cached_boot_s, first_pull_s } = this.lifecycle;
    if (cached_boot_s === null && first_pull_s === 0) return t.boot_s;
    for (const other of this.live.values()) if (other.hist.machine_id === machineId) this.advance(other);
    if (this.images.has(machineId, image)) return cached_boot_s ?? t.boot_s;
    return t.boot_s + first_pull_s;
  }

  private pullError(image: string): string | null {
    const { repo, tag } = splitImage(image);
    return this.lifecycle.missing_images.some((p) => new RegExp(p).test(image)) ? missingImageMessage(repo, tag) : null;
  }

  private drawTimings(id: number, image: string): InstanceTimings {
    const rng = mulberry32(Math.floor(hashUnit(this.seed, id) * 2 ** 32));
    const { boot_s, lost_after_s } = this.lifecycle;
    return {
      provision_s: this.lifecycle.provision_s,
      boot_s: between(rng, boot_s.min, boot_s.max),
      fail_after_s: this.lifecycle.fail_after_s,
      lost_after_s: between(rng, lost_after_s.min, lost_after_s.max),
      lost_to: pick(rng, ['offline', 'unknown', 'exited'] as const),
      pull_error: this.pullError(image),
    };
  }
}

/** The earliest service stop due, if any. */
function firstStop(inst: LiveInstance): { at: number; whileRunning: boolean } | undefined {
  let first: { at: number; whileRunning: boolean } | undefined;
  for (const s of inst.serviceStops) if (!first || s.at < first.at) first = s;
  return first;
}

/** Statuses in which a bid holds (or waits for) the machine, and so can be outbid. */
function contending(status: ActualStatus): boolean {
  return (
    status === null ||
    status === 'loading' ||
    status === 'running' ||
    status === 'rebooting' ||
    status === 'recycling' ||
    status === 'created'
  );
}
