// The one source of instance lists for the daemon, so that lists cost the same whatever the size of
// the account. The v1 list returns at most 25 instances per call at ~1 call/s, so reading the whole
// account (40 calls for 1,000 instances) for every status check would see a booting instance
// running up to 40 s late. Instead each interval has two kinds of calls, made one at a time from
// the same list budget (the client's `list` limiter spaces them):
//
// - a targeted list at the start of every interval: only the instances runs are *waiting on*
//   (booting: waiting for running; destroying: waiting for absence), by `select_filters` on `id`,
//   25 ids per call; plus, as soon as asked, look-ups by label of creates whose outcome is unknown
//   and by id of instances at their boot deadline (the last list seen may be older than the deadline).
//   An id a filtered list asked for and did not get IS absent. Running instances of tasks are asked
//   for 200 ids a call with `actual_status in` every status that is not running nor on its way up,
//   so that a task that stopped its own instance is seen one interval later however large the
//   account (an empty answer costs one call; it is never read as absence). When more than a page of instances
//   are booting at once (many runs started together), reading each of them every interval would
//   take one call per 25 of them; instead they are asked for 200 ids at a time together with
//   `actual_status in` every stored status but `loading` (and null), so a call returns only the
//   instances that moved on; those ids are not read as absent, and their losses are left to the
//   complete sweeps, like a running instance's. Should the service refuse that query (400), the
//   poller goes back to 25 ids a call for good.
// - the sweep, in the background: the whole account page by page, for losses of running instances
//   and for the ownership sweep (adoption and orphans). A page goes only when its call leaves the
//   list budget's next slot free for the next interval's targeted list, except that every interval
//   gets at least one page, so a long targeted list never starves the sweep. A new sweep starts at
//   most once per interval. Statuses of the instances on a page are handed over at once; absences
//   only when the sweep is complete, dated from its start.
//
// When the whole account fits in one page, the sweep's single page serves the targets as well: one
// call per interval, as before this poller existed.
//
// Daemons sharing a store (issue #21) share one key's list budget: only the leader sweeps, and
// writes what its lists show to the store (`SharedView`); the others read it at the start of each
// round instead of sweeping, and make only their own targeted lists and look-ups. A leader that
// stops leading drops its sweep; a daemon that starts leading sweeps from its next round. A follower
// whose leader's complete sweeps are overdue (a leader cut from the service, not from the store)
// takes the lead and sweeps in that round (`standIn`), so orphans are found while any daemon can
// reach the service.
//
// A failed call is logged and skipped, never read as absence, and the poller waits for the next
// interval instead of trying again at once. State: sleeping until the next interval or until a
// look-up is asked for → listing → handing over → sleeping; stop() ends it.
import type { Instance, InstanceFilters, InstancePage, InstancePageQuery, MarketClient } from '../../client/types.js';
import type { Clock, Timer } from '../../clock.js';
import { BerthError, toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';

/** The v1 list's page size: also the most ids or labels one filtered call asks for. */
const PAGE_SIZE = 25;
/** Booting ids per call when only those that left `loading` are asked for (the query stays ~2.5 KB). */
const MOVED_ON_CHUNK = 200;
/**
 * Every stored `actual_status` but the ones of an instance still on its way up (`loading`, and null
 * while it is provisioned): asked for by name, since a filter on a null column means different
 * things to different databases. `offline` is left out: show-instances-v1.mdx calls it "computed,
 * not stored in DB", so no filter matches it (such an instance shows up in the sweeps).
 */
const MOVED_ON = ['running', 'exited', 'unknown', 'stopped', 'created', 'frozen', 'rebooting'];
/** The statuses of an instance that is no longer running: what a task that stopped its own instance looks like (and an outbid or a failure). */
const LEFT_RUNNING = MOVED_ON.filter((s) => s !== 'running');
/** A sweep that has not ended after this many pages (250,000 instances) is abandoned. */
const MAX_SWEEP_PAGES = 10_000;

/** What the daemon hears from the poller. */
export interface PollSubscriber {
  /**
   * Instance ids runs are waiting on now: `forStatus`, booting ones, for a status other than
   * `loading`; `forAbsence`, ones being destroyed (or waiting to start again), for any change or absence;
   * `forEnd`, running instances of tasks, for a status that is no longer running (the task's end).
   */
  waited(): { forStatus: number[]; forAbsence: number[]; forEnd?: number[] };
  /** Instances a list showed; `listedAt` is when that call started. */
  onSeen(instances: Instance[], listedAt: number): void;
  /** Ids a filtered list asked for and did not get: absent as of `listedAt`. */
  onAbsent(ids: number[], listedAt: number): void;
  /** A sweep went through every page: the account's instances as listed from `startedAt` on. */
  onSweep(instances: Instance[], startedAt: number): Promise<void> | void;
  /**
   * A list filtered on these ids (of `forEnd`) answered: those it did not show have not left
   * running as of `listedAt`, or are gone (the sweeps tell).
   */
  onCovered?(ids: number[], listedAt: number): void;
}

/**
 * The account's view shared by the daemons of one store (src/daemon/cluster/shared-view.ts). Times
 * are this daemon's clock; the implementation turns them into the database's and back.
 */
export interface SharedView {
  /** This daemon sweeps the account and publishes what its lists show; the others read it. */
  leads(): boolean;
  /** What one list of the leader showed (`sweepStartedAt`: the start of the sweep it was a page of). */
  publish(instances: Instance[], listedAt: number, sweepStartedAt: number | null): void;
  /** The leader's sweep that started at `startedAt` went through every page. */
  sweepDone(startedAt: number): void;
  /** What the leader's lists showed since the last read, and its last complete sweep if that is new. */
  read(): { seen: Array<{ instances: Instance[]; listedAt: number }>; sweep?: { instances: Instance[]; startedAt: number } };
  /**
   * No complete sweep for `overdueMs` under the current leader (it cannot reach the service): this
   * daemon takes the lead, to sweep itself; true when it did.
   */
  takeLeadIfOverdue(overdueMs: number): boolean;
}

/** What the run actors need of the poller. */
export interface InstanceLists {
  /**
   * The instance labelled `label` in a list started at or after `after` (ms since epoch), or null
   * when that list shows none. Asks for a look-up at once; many look-ups share one call.
   */
  findLabel(label: string, after: number, signal?: AbortSignal): Promise<Instance | null>;
  /**
   * Instance `id` as a list filtered on it and started at or after `after` shows it, or null when
   * that list does not (it is absent). Asks for a look-up at once; many look-ups share one call.
   */
  lookAt(id: number, after: number, signal?: AbortSignal): Promise<Instance | null>;
}

export interface PollerOptions {
  client: MarketClient;
  clock: Clock;
  intervalMs: number;
  /**
   * How long one list call holds the list budget: 1000 / rate_limits.list.per_s, or, when this
   * daemon has a share of the key's limits, a function that tells it as it is now.
   */
  listSpacingMs: number | (() => number);
  log: Logger;
  /** A sweep went through every page (for /metrics): how many, and how long since its first was asked for. */
  onSweepDone?: (sweep: { pages: number; durationMs: number; instances: number }) => void;
  /** Several daemons on one store: the leader's lists are shared through it. */
  shared?: SharedView;
}

/** A look-up: by label (a create whose outcome is unknown) or by id (an instance at its boot deadline). */
interface LabelWaiter {
  label?: string;
  id?: number;
  after: number;
  resolve(instance: Instance | null): void;
  reject(err: unknown): void;
}

interface Sweep {
  startedAt: number;
  afterToken: string | null;
  pages: number;
  seen: Map<number, Instance>;
  /**
   * Every page so far reached the store (when this daemon leads several). A sweep with a page the
   * store missed is never announced as complete: the others would read that page's instances as gone.
   */
  published: boolean;
}

const chunks = <T>(items: T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

export class InstancePoller implements InstanceLists {
  private readonly abort = new AbortController();
  private subscriber: PollSubscriber | undefined;
  private loop: Promise<void> | undefined;
  private waiters: LabelWaiter[] = [];
  private wake: (() => void) | undefined;
  private sweep: Sweep | undefined;
  private lastSweepStartedAt = Number.NEGATIVE_INFINITY;
  /** Pages of the last complete sweep; undefined before the first one. */
  private lastSweepPages: number | undefined;
  private consecutiveFailures = 0;
  /** When the list budget has its next free slot, as far as this poller's own calls go. */
  private nextSlotAt = Number.NEGATIVE_INFINITY;
  /** A sweep page was asked for since the last round began (each round lets at least one go). */
  private sweptSinceRound = true;
  /**
   * The service refused the moved-on query (400): its shape (200 ids and a status list) is not in
   * the docs' examples. From then on every booting instance is read 25 ids at a time, as below 25.
   */
  private movedOnRefused = false;
  /** The shared view failed last time (logged once until it answers again). */
  private sharedFailing = false;

  constructor(private readonly options: PollerOptions) {}

  /** Sets the one subscriber; returns a function that removes it. */
  subscribe(subscriber: PollSubscriber): () => void {
    this.subscriber = subscriber;
    return () => {
      if (this.subscriber === subscriber) this.subscriber = undefined;
    };
  }

  start(): void {
    this.loop ??= this.run();
  }

  findLabel(label: string, after: number, signal?: AbortSignal): Promise<Instance | null> {
    return this.lookUp({ label }, after, signal);
  }

  lookAt(id: number, after: number, signal?: AbortSignal): Promise<Instance | null> {
    return this.lookUp({ id }, after, signal);
  }

  private lookUp(what: { label: string } | { id: number }, after: number, signal?: AbortSignal): Promise<Instance | null> {
    return new Promise<Instance | null>((resolve, reject) => {
      if (this.abort.signal.aborted) return reject(new BerthError('aborted', 'The daemon is stopping.'));
      const onAbort = () => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new BerthError('aborted', 'The look-up of an instance was cancelled.'));
      };
      const waiter: LabelWaiter = {
        ...what,
        after,
        resolve: (found) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(found);
        },
        reject,
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
      this.wake?.();
    });
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.wake?.();
    await this.loop?.catch(() => undefined);
    // Never "not found": a look-up cut short must leave the create's journal row for the next start.
    for (const w of this.waiters.splice(0)) w.reject(new BerthError('aborted', 'The daemon is stopping.'));
  }

  private get stopped(): boolean {
    return this.abort.signal.aborted;
  }

  private async run(): Promise<void> {
    const { clock, intervalMs } = this.options;
    let nextRoundAt = clock.now();
    let failed = false;
    while (!this.stopped) {
      const now = clock.now();
      if (!this.sweeps) this.sweep = undefined; // another daemon leads now: its sweeps are read instead
      const sweepWanted = this.sweeps && (this.sweep !== undefined || now - this.lastSweepStartedAt >= intervalMs);
      // A round is due on the interval's grid; a round that ran late lets one sweep page go first.
      if (now >= nextRoundAt && (this.sweptSinceRound || !sweepWanted || failed)) {
        nextRoundAt = Math.max(nextRoundAt + intervalMs, now);
        this.sweptSinceRound = false;
        failed = !(await this.round());
        continue;
      }
      if (failed) {
        await this.sleepUntil(nextRoundAt, false);
        continue;
      }
      if (this.dueLookups(now).length > 0) {
        failed = !(await this.lookups());
        continue;
      }
      // A sweep page goes when its call leaves the next round's slot free (or none went this round).
      if (sweepWanted && (!this.sweptSinceRound || Math.max(now, this.nextSlotAt) + this.spacingMs() <= nextRoundAt)) {
        failed = !(await this.guard(() => this.sweepPage()));
        continue;
      }
      await this.sleepUntil(nextRoundAt, true);
    }
  }

  /**
   * One list call, dated from the moment it was asked for: never later than it really leaves (the
   * limiter may hold it, a retry may send it again), so `listedAt` errs only on the early, safe side.
   * It books the list budget's next slot, which is how this poller keeps a slot free for the
   * targeted list (the client's limiter does the actual spacing).
   */
  private async list(query: InstancePageQuery): Promise<{ page: InstancePage; listedAt: number }> {
    const listedAt = this.options.clock.now();
    this.nextSlotAt = Math.max(listedAt, this.nextSlotAt) + this.spacingMs();
    const page = await this.options.client.listInstancePage(query, { signal: this.abort.signal });
    return { page, listedAt };
  }

  private spacingMs(): number {
    const spacing = this.options.listSpacingMs;
    return typeof spacing === 'number' ? spacing : spacing();
  }

  /** This daemon sweeps the account: alone, or as the leader of the daemons sharing its store. */
  private get sweeps(): boolean {
    return this.options.shared?.leads() ?? true;
  }

  /** The start of an interval: the targeted list (or the one-page sweep that covers it too). */
  private async round(): Promise<boolean> {
    const now = this.options.clock.now();
    if (!this.sweeps) {
      await this.readShared();
      this.standIn();
    }
    const smallAccount = this.lastSweepPages === undefined || this.lastSweepPages <= 1;
    if (this.sweeps && smallAccount && this.sweep === undefined && now - this.lastSweepStartedAt >= this.options.intervalMs) {
      if (!(await this.guard(() => this.sweepPage()))) return false;
      if (this.sweep === undefined) return true; // one page was all: every target was in it
    }
    const ok = (await this.guard(() => this.targeted())) && (await this.lookups());
    // The sweep's page of this round comes after its targeted list, however long that was.
    this.sweptSinceRound = false;
    return ok;
  }

  /** Runs one step; a failure is logged, counted and reported as false, never thrown. */
  private async guard(step: () => Promise<void>): Promise<boolean> {
    try {
      await step();
      if (this.consecutiveFailures > 0) this.options.log.info({ failures: this.consecutiveFailures }, 'instance list works again');
      this.consecutiveFailures = 0;
      return true;
    } catch (err) {
      if (this.stopped) return false;
      this.consecutiveFailures++;
      this.options.log.warn(
        { err: toRunError(err), failures: this.consecutiveFailures },
        'instance list failed; statuses are not updated this round',
      );
      return false;
    }
  }

  private async targeted(): Promise<void> {
    const waited = this.subscriber?.waited() ?? { forStatus: [], forAbsence: [] };
    if (!this.movedOnRefused && waited.forEnd?.length) await this.movedOn(waited.forEnd, LEFT_RUNNING);
    const many = !this.movedOnRefused && waited.forStatus.length > PAGE_SIZE && (await this.movedOn(waited.forStatus, MOVED_ON));
    const ids = [...new Set(many ? waited.forAbsence : [...waited.forStatus, ...waited.forAbsence])];
    for (const chunk of chunks(ids, PAGE_SIZE)) {
      if (this.stopped) return;
      const { instances: found, listedAt } = await this.filtered({ id: { in: chunk } });
      const seen = new Set(found.map((i) => i.id));
      this.seen(found, listedAt, null);
      const absent = chunk.filter((id) => !seen.has(id));
      if (absent.length > 0) this.subscriber?.onAbsent(absent, listedAt);
      this.settleWaiters(found, listedAt, { ids: new Set(chunk) });
    }
  }

  /**
   * Reads the instances among `ids` whose status is one of `statuses`, 200 ids a call: booting ones
   * that left `loading`, running tasks' that stopped. Absence is not inferred: the others have not
   * moved, or are gone (the sweep tells). False when the service refuses the query, which then is
   * not asked again.
   */
  private async movedOn(ids: number[], statuses: string[]): Promise<boolean> {
    for (const chunk of chunks([...new Set(ids)], MOVED_ON_CHUNK)) {
      if (this.stopped) return true;
      try {
        const { instances: moved, listedAt } = await this.filtered({ id: { in: chunk }, actual_status: { in: statuses } });
        this.seen(moved, listedAt, null);
        this.subscriber?.onCovered?.(chunk, listedAt);
      } catch (err) {
        if (!(err instanceof BerthError && err.code === 'bad_request')) throw err;
        this.movedOnRefused = true;
        this.options.log.warn(
          { err: toRunError(err) },
          "the service refused a list of instances by status; booting ones are read 25 ids at a time from now on, and a task's end is seen in the sweeps",
        );
        return false;
      }
    }
    return true;
  }

  private dueLookups(now: number): LabelWaiter[] {
    return this.waiters.filter((w) => w.after <= now);
  }

  /** Looks up every label and id asked for before now; false when a call failed (those waiters wait on). */
  private async lookups(): Promise<boolean> {
    const due = this.dueLookups(this.options.clock.now());
    const labels = [...new Set(due.flatMap((w) => (w.label === undefined ? [] : [w.label])))];
    const ids = [...new Set(due.flatMap((w) => (w.id === undefined ? [] : [w.id])))];
    const calls = [
      ...chunks(labels, PAGE_SIZE).map((chunk) => ({ filters: { label: { in: chunk } }, scope: { labels: new Set(chunk) } })),
      ...chunks(ids, PAGE_SIZE).map((chunk) => ({ filters: { id: { in: chunk } }, scope: { ids: new Set(chunk) } })),
    ];
    for (const { filters, scope } of calls) {
      if (this.stopped) return false;
      let got: { instances: Instance[]; listedAt: number };
      try {
        got = await this.filtered(filters);
      } catch (err) {
        return this.guard(() => Promise.reject(err));
      }
      this.settleWaiters(got.instances, got.listedAt, scope);
    }
    return true;
  }

  /**
   * Resolves the waiters that asked at or before `listedAt` and that this list answers: those for
   * `scope`'s labels and ids (a filtered list), or every one (a complete sweep, scope undefined).
   */
  private settleWaiters(instances: Instance[], listedAt: number, scope?: { labels?: Set<string>; ids?: Set<number> }): void {
    const byLabel = new Map<string, Instance>();
    const byId = new Map<number, Instance>();
    for (const inst of instances) {
      if (inst.label && !byLabel.has(inst.label)) byLabel.set(inst.label, inst);
      byId.set(inst.id, inst);
    }
    const answers = (w: LabelWaiter) =>
      !scope || (w.label !== undefined && scope.labels?.has(w.label) === true) || (w.id !== undefined && scope.ids?.has(w.id) === true);
    const ready = this.waiters.filter((w) => w.after <= listedAt && answers(w));
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve((w.label !== undefined ? byLabel.get(w.label) : byId.get(w.id!)) ?? null);
  }

  /** Every instance matching `filters`, dated from the first call (a filtered list is short; it still follows next_token). */
  private async filtered(filters: InstanceFilters): Promise<{ instances: Instance[]; listedAt: number }> {
    const instances: Instance[] = [];
    let listedAt: number | undefined;
    let afterToken: string | null = null;
    do {
      // Part of a list must never pass for all of it: what it did not reach is not absent.
      if (this.stopped) throw new BerthError('aborted', 'The daemon is stopping.');
      const got = await this.list({ filters, afterToken });
      listedAt ??= got.listedAt;
      instances.push(...got.page.instances);
      if (got.page.nextToken !== null && got.page.nextToken === afterToken) {
        throw new BerthError('bad_response', 'The instance list repeated a page token.');
      }
      afterToken = got.page.nextToken;
    } while (afterToken !== null);
    return { instances, listedAt: listedAt! };
  }

  /** One page of the sweep (starting one if none runs); hands over the sweep when it was the last. */
  private async sweepPage(): Promise<void> {
    const now = this.options.clock.now();
    // Dated from when its first page was asked for: an instance made after that is not counted missing.
    this.sweep ??= { startedAt: now, afterToken: null, pages: 0, seen: new Map(), published: true };
    if (this.sweep.pages === 0) this.lastSweepStartedAt = this.sweep.startedAt;
    const sweep = this.sweep;
    this.sweptSinceRound = true;
    // A failed page is asked for again next time; the sweep keeps its start.
    const { page, listedAt } = await this.list({ afterToken: sweep.afterToken });
    if (!this.sweeps) {
      // The lead went elsewhere while this page was listed: its pages no longer reach the store, so
      // the sweep must not be announced complete; the new leader's sweeps are read instead.
      this.sweep = undefined;
      return;
    }
    sweep.pages++;
    for (const inst of page.instances) sweep.seen.set(inst.id, inst);
    if (page.instances.length > 0 && !this.seen(page.instances, listedAt, sweep.startedAt)) sweep.published = false;
    if (page.nextToken !== null) {
      if (page.nextToken === sweep.afterToken || sweep.pages >= MAX_SWEEP_PAGES) {
        // A list that does not move on must not end a sweep: what it never showed is not absent.
        this.sweep = undefined;
        throw new BerthError('bad_response', `The instance list did not end (page ${sweep.pages}); the sweep starts over.`);
      }
      sweep.afterToken = page.nextToken;
      return;
    }
    this.sweep = undefined;
    this.lastSweepPages = sweep.pages;
    const instances = [...sweep.seen.values()];
    this.options.onSweepDone?.({ pages: sweep.pages, durationMs: this.options.clock.now() - sweep.startedAt, instances: instances.length });
    if (sweep.published) this.share((view) => view.sweepDone(sweep.startedAt));
    await this.subscriber?.onSweep(instances, sweep.startedAt);
    this.settleWaiters(instances, sweep.startedAt);
  }

  /** Hands what a list showed to the runs, and to the other daemons when this one leads; false when the store missed it. */
  private seen(instances: Instance[], listedAt: number, sweepStartedAt: number | null): boolean {
    this.subscriber?.onSeen(instances, listedAt);
    if (instances.length === 0 || !this.options.shared || !this.sweeps) return true;
    return this.share((view) => (view.publish(instances, listedAt, sweepStartedAt), true)) ?? false;
  }

  /** A follower's round: what the leader's lists showed since the last one, and its last complete sweep. */
  private async readShared(): Promise<void> {
    const got = this.share((view) => view.read());
    if (!got) return;
    for (const { instances, listedAt } of got.seen) this.subscriber?.onSeen(instances, listedAt);
    if (!got.sweep) return;
    // The leader's sweep's size: how long one may take (./poller.ts `standIn`), and this daemon's once it leads.
    this.lastSweepPages = Math.max(1, Math.ceil(got.sweep.instances.length / PAGE_SIZE));
    await this.subscriber?.onSweep(got.sweep.instances, got.sweep.startedAt);
  }

  /**
   * A follower whose leader's sweeps are overdue takes the lead (and sweeps from this round on), so
   * that orphans are found while any daemon reaches the service. Overdue: no complete sweep for two
   * intervals when the account is one page; for a sweep of P pages, which may take P intervals and
   * start only once the one before it ended, 2P + 1 (a new leader, given as long, ends its first).
   */
  private standIn(): void {
    const pages = this.lastSweepPages ?? 1;
    const overdueMs = (pages <= 1 ? 2 : 2 * pages + 1) * this.options.intervalMs;
    if (!this.share((view) => view.takeLeadIfOverdue(overdueMs))) return;
    this.options.log.warn(
      { overdueMs },
      `the leading daemon has not completed a sweep of the account for over ${overdueMs / 1000} s (cut from the service?): this daemon takes the lead and sweeps`,
    );
  }

  /** A step on the shared view: a store that does not answer costs a warning, never the list. */
  private share<T>(step: (view: SharedView) => T): T | undefined {
    const view = this.options.shared;
    if (!view) return undefined;
    try {
      const result = step(view);
      if (this.sharedFailing) this.options.log.info('the shared view of the instances works again');
      this.sharedFailing = false;
      return result;
    } catch (err) {
      if (!this.sharedFailing)
        this.options.log.warn(
          { err: toRunError(err) },
          'cannot share the view of the instances through the store now; trying again next round',
        );
      this.sharedFailing = true;
      return undefined;
    }
  }

  /** Sleeps until `at`; a look-up asked for meanwhile wakes it when `wakeForLookups`. */
  private sleepUntil(at: number, wakeForLookups: boolean): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise<void>((resolve) => {
      // eslint-disable-next-line prefer-const -- assigned after `done`, which cancels it, is defined
      let timer: Timer | undefined;
      const done = () => {
        timer?.cancel();
        this.wake = undefined;
        resolve();
      };
      this.wake = () => {
        if (wakeForLookups || this.stopped) done();
      };
      timer = this.options.clock.setTimer(done, Math.max(0, at - this.options.clock.now()));
    });
  }
}
