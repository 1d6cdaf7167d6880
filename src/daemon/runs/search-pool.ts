// One offer search serves many runs (issue #20 items 1-2). The service allows 10 searches a minute
// per key, so a sweep of N identical runs that each searched for itself would wait N/10 minutes
// before its last run tried an offer. Here runs whose queries are the same (after their relax
// level) share one answer while it is fresh (`maxAgeMs`), and each run is handed offers no other
// run of this daemon was handed or holds, so two runs never try one offer.
//
// - Sharing: queries are grouped by everything but the price cap and a plain GPU-name list
//   (`gpu_name` eq/in). One search covers a group with the widest cap and the union of the names
//   its waiting runs ask for, and each run re-checks the returned offers against its own cap (on
//   the billed price, as before) and names. No other filter is widened: berth could not re-check it.
// - Running out: a run that finds every offer it could use handed to others asks for ONE new
//   search for its group, with the offers handed out, claimed and blocked left out (`id notin`);
//   the other runs that run out meanwhile wait for that search instead of making their own.
// - The budget: one search in flight at a time (the rate limiter spaces them anyway), and the next
//   goes to the group whose run has waited longest, counted from the run's first unanswered request
//   (relax steps and fail-overs keep the count going), so a burst of new runs of another spec does
//   not starve runs already failing over.
// - Gone offers stay bounded: one run is handed at most `perAnswer` (runs.gone_offers_per_search)
//   offers from one answer, then waits for its group's next search, as it would search again.
// - Never stuck on a stale answer: an answer made after a run joined is final for that run, even
//   empty (the run then relaxes, as it would on its own search), so a service that ignored
//   `notin` cannot make runs search forever; but not when the answer's offers went to other runs
//   from that same answer (more runs waited than it held): those wait for the group's next search.
// - Nor on a wider one: an answer made for a wider cap or more GPU names that came back full (as
//   many offers as its limit, in the shared order) may have left out every offer a narrower run
//   could use, though the service has some (a run capped at $0.40/h failed no_offers from an answer
//   of $0.45-0.90/h offers; alone it got one at $0.32/h). When it serves such a run nothing, that
//   run gets a search of its own query next, whose answer is final for it as above.
import type { Offer, SearchQuery } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import { buildSearchQuery, usableOffers, type Blocked } from '../../job-spec/search-query.js';
import type { ResolvedJobSpec } from '../../job-spec/schema.js';
import type { OfferClaims } from './offer-claims.js';
import { abortedError } from '../../client/abort.js';

export interface SearchPoolDeps {
  /** The rate-limited service search (the client's); `signal` fires once no run waits for it. */
  search(query: SearchQuery, signal: AbortSignal): Promise<Offer[]>;
  clock: Pick<Clock, 'now'>;
  /** Offers runs of this daemon are creating on or hold: never handed out, left out of searches. */
  claims: Pick<OfferClaims, 'held'>;
  /** How long an answer serves new requests (`runs.search_share_s`). */
  maxAgeMs: number;
  /**
   * Offers one run may be handed from one answer (`runs.gone_offers_per_search`); then it waits for
   * its group's next search, so a run whose offers keep vanishing makes that many creates a search.
   */
  perAnswer: number;
}

export interface PoolRequest<T> {
  runId: string;
  /** The spec as the run searches now (its search type after an outbid switch). */
  spec: ResolvedJobSpec;
  relaxLevel: number;
  /** The run's own blocked offers and machines. */
  blocked: Blocked;
  /**
   * Chooses from the offers the run may use, in the answer's order, none handed to another run;
   * `take` are handed to this run. Called once, synchronously, when the run is served.
   */
  choose(usable: Offer[]): { take: number[]; result: T };
}

/** A plain GPU-name list a wider search can cover (and berth re-check); `any` = no gpu_name filter. */
type Gpus = Set<string> | 'any';

interface Entry {
  sentAt: number;
  offers: Offer[];
  cap: number;
  gpus: Gpus;
  /** The search's limit: an answer this long may have left offers out. */
  limit: number;
  /** Offers handed to each run from this answer. */
  handedTo: Map<string, number>;
}

interface Waiter {
  req: PoolRequest<unknown>;
  joinedAt: number;
  since: number;
  resolve(value: unknown): void;
  reject(err: unknown): void;
  cancel(): void;
}

interface Group {
  /** The query without the price cap, the GPU names and the limit (the part all members share). */
  base: SearchQuery;
  entry: Entry | undefined;
  waiters: Waiter[];
  /** The group's search in flight: aborted when its last waiting run stops waiting (a stop, a cancel). */
  inflight: AbortController | undefined;
}

export interface SearchPoolStats {
  searches: number;
  /** Requests served from an answer another run's request fetched. */
  shared: number;
}

const normName = (n: string) => n.replaceAll('_', ' ');

/** The GPU names a gpu_name filter allows, when it is a plain eq/in list; undefined when it is not. */
function gpusOf(filter: unknown): Gpus | undefined {
  if (filter === undefined) return 'any';
  if (typeof filter !== 'object' || filter === null) return undefined;
  const ops = Object.keys(filter);
  const f = filter as Record<string, unknown>;
  if (ops.length === 1 && typeof f['eq'] === 'string') return new Set([normName(f['eq'])]);
  if (ops.length === 1 && Array.isArray(f['in']) && f['in'].every((v) => typeof v === 'string'))
    return new Set((f['in'] as string[]).map(normName));
  return undefined;
}

const covers = (wide: Gpus, narrow: Gpus) => wide === 'any' || (narrow !== 'any' && [...narrow].every((g) => wide.has(g)));

/** Stable JSON (sorted keys), so two queries built in a different order group together. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

interface Shape {
  key: string;
  base: SearchQuery;
  cap: number;
  gpus: Gpus;
  limit: number;
}

/** The run's query split into the shared part and the parts a wider search covers. */
function shapeOf(spec: ResolvedJobSpec, relaxLevel: number): Shape {
  const query = buildSearchQuery(spec, relaxLevel, { offerIds: [], machineIds: [] });
  const { dph_total: _cap, limit, ...rest } = query;
  const gpus = gpusOf(rest['gpu_name']);
  const base: SearchQuery = { ...rest };
  if (gpus !== undefined) delete base['gpu_name'];
  // A gpu_name filter of another form stays in the key: the group then shares it exactly.
  return { key: canonical(base), base, cap: spec.max_price_per_hour, gpus: gpus ?? 'any', limit: typeof limit === 'number' ? limit : 64 };
}

export class SearchPool {
  private readonly groups = new Map<string, Group>();
  /** Offers handed to a run and when: not handed again while the run may still try them. */
  private readonly handed = new Map<number, { runId: string; at: number }>();
  /** When each run's current wait for offers began (kept across relax steps). */
  private readonly since = new Map<string, number>();
  /** Runs a wider answer served nothing that may have left their offers out: their own query next. */
  private readonly ownSearch = new Set<string>();
  private busy = false;
  private readonly counters: SearchPoolStats = { searches: 0, shared: 0 };

  constructor(private readonly deps: SearchPoolDeps) {}

  stats(): SearchPoolStats {
    return { ...this.counters };
  }

  /** Serves the run from a fresh answer, or from the next search of its group. */
  offersFor<T>(req: PoolRequest<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortedError(signal.reason));
    const now = this.deps.clock.now();
    // The run is done with what it was handed before: it asks only once those are tried.
    this.releaseRun(req.runId);
    if (!this.since.has(req.runId)) this.since.set(req.runId, now);
    const shape = shapeOf(req.spec, req.relaxLevel);
    let group = this.groups.get(shape.key);
    if (!group) this.groups.set(shape.key, (group = { base: shape.base, entry: undefined, waiters: [], inflight: undefined }));
    const served = this.tryServe(group, req, shape, now, false);
    if (served) {
      this.counters.shared++;
      return Promise.resolve(served.result);
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        group.waiters = group.waiters.filter((w) => w !== waiter);
        this.since.delete(req.runId);
        this.ownSearch.delete(req.runId);
        // Nobody left to serve: the call must not hold the client (and a stopping daemon) up.
        if (group.waiters.length === 0) group.inflight?.abort();
        reject(abortedError(signal?.reason));
      };
      const waiter: Waiter = {
        req: req as PoolRequest<unknown>,
        joinedAt: now,
        since: this.since.get(req.runId) ?? now,
        resolve: (v) => resolve(v as T),
        reject,
        cancel: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      group.waiters.push(waiter);
      this.pump();
    });
  }

  /**
   * Serves the request from the group's answer when that answer covers it and is fresh, and either
   * still has an offer for it or was made after the run asked (`final`). Undefined: it must wait.
   */
  private tryServe<T>(group: Group, req: PoolRequest<T>, shape: Shape, now: number, final: boolean): { result: T } | undefined {
    const entry = group.entry;
    if (!entry || !(entry.cap >= shape.cap) || !covers(entry.gpus, shape.gpus)) return undefined;
    if (!final && now - entry.sentAt > this.deps.maxAgeMs) return undefined;
    if (!final && (entry.handedTo.get(req.runId) ?? 0) >= this.deps.perAnswer) return undefined;
    const forRun = this.forRun(entry.offers, req, shape);
    if (forRun.length === 0 && this.widerAndCut(entry, shape)) {
      this.ownSearch.add(req.runId);
      return undefined;
    }
    const taken = new Set([...this.deps.claims.held(), ...this.heldByOthers(req.runId, now)]);
    const usable = forRun.filter((o) => !taken.has(o.id));
    // Every offer it could use is someone else's: one new search for the group, not this answer's
    // "none". Even from an answer made after the run asked, when other runs were handed those offers
    // from this very answer (more runs than it held: the next search has more); only an answer whose
    // offers were all taken before it was made (a service that ignored `notin`) is final.
    if (usable.length === 0 && forRun.length > 0 && (!final || this.handedFrom(entry, forRun))) return undefined;
    const { take, result } = req.choose(usable);
    for (const id of take) this.handed.set(id, { runId: req.runId, at: now });
    entry.handedTo.set(req.runId, (entry.handedTo.get(req.runId) ?? 0) + take.length);
    if (take.length > 0) this.since.delete(req.runId);
    this.ownSearch.delete(req.runId);
    return { result };
  }

  /** The answer was searched wider than the run's query and came back full: it proves nothing for the run. */
  private widerAndCut(entry: Entry, shape: Shape): boolean {
    return entry.offers.length >= entry.limit && (entry.cap > shape.cap || !covers(shape.gpus, entry.gpus));
  }

  /** Whether any of these offers was handed to a run from this answer (since it was made). */
  private handedFrom(entry: Entry, offers: Offer[]): boolean {
    return offers.some((o) => (this.handed.get(o.id)?.at ?? Number.NEGATIVE_INFINITY) >= entry.sentAt);
  }

  /** The answer's offers this run may try: its own price cap, GPU names and blocks. */
  private forRun(offers: Offer[], req: PoolRequest<unknown>, shape: Shape): Offer[] {
    const names = shape.gpus;
    const named = names === 'any' ? offers : offers.filter((o) => typeof o.gpu_name === 'string' && names.has(normName(o.gpu_name)));
    return usableOffers(named, req.spec, req.blocked);
  }

  private heldByOthers(runId: string, now: number): number[] {
    const out: number[] = [];
    for (const [id, h] of this.handed) {
      // A handed offer the run never created on is free again once the run has surely moved on.
      if (now - h.at > this.holdMs()) this.handed.delete(id);
      else if (h.runId !== runId) out.push(id);
    }
    return out;
  }

  private holdMs(): number {
    return Math.max(2 * this.deps.maxAgeMs, 60_000);
  }

  private releaseRun(runId: string): void {
    for (const [id, h] of this.handed) if (h.runId === runId) this.handed.delete(id);
  }

  /** Starts the next search when none is in flight: for the group whose run has waited longest. */
  private pump(): void {
    if (this.busy) return;
    let next: Group | undefined;
    let oldest = Number.POSITIVE_INFINITY;
    for (const g of this.groups.values()) {
      for (const w of g.waiters) {
        if (w.since >= oldest) continue;
        oldest = w.since;
        next = g;
      }
    }
    if (!next) return;
    this.busy = true;
    void this.searchFor(next).finally(() => {
      this.busy = false;
      this.pump();
    });
  }

  private async searchFor(group: Group): Promise<void> {
    // The run that waited longest, with its own query when a wider answer proved nothing for it;
    // otherwise every waiting run but those, with the widest cap and names among them.
    const oldest = group.waiters.reduce((a, b) => (b.since < a.since ? b : a));
    const waiters = this.ownSearch.has(oldest.req.runId) ? [oldest] : group.waiters.filter((w) => !this.ownSearch.has(w.req.runId));
    const shapes = waiters.map((w) => shapeOf(w.req.spec, w.req.relaxLevel));
    const cap = Math.max(...shapes.map((s) => s.cap));
    const gpus: Gpus = shapes.some((s) => s.gpus === 'any') ? 'any' : new Set(shapes.flatMap((s) => [...(s.gpus as Set<string>)]));
    const limit = Math.max(...shapes.map((s) => s.limit));
    const sentAt = this.deps.clock.now();
    const exclude = new Set([
      ...this.deps.claims.held(),
      ...this.heldByOthers('', sentAt),
      ...waiters.flatMap((w) => w.req.blocked.offerIds),
    ]);
    const query = this.queryFor(group.base, cap, gpus, limit, [...exclude]);
    this.counters.searches++;
    let offers: Offer[];
    const inflight = new AbortController();
    group.inflight = inflight;
    try {
      offers = await this.deps.search(query, inflight.signal);
    } catch (err) {
      // Each run backs off on its own, as after its own failed search (those that joined meanwhile too).
      for (const w of [...group.waiters]) {
        this.ownSearch.delete(w.req.runId);
        this.settle(group, w, () => w.reject(err));
      }
      return;
    } finally {
      group.inflight = undefined;
    }
    group.entry = { sentAt, offers, cap, gpus, limit, handedTo: new Map() };
    const now = this.deps.clock.now();
    // Runs that waited longest choose first; those that joined during the search are served too.
    const all = [...group.waiters].sort((a, b) => a.since - b.since);
    let first = true;
    for (const w of all) {
      const shape = shapeOf(w.req.spec, w.req.relaxLevel);
      let served: { result: unknown } | undefined;
      try {
        served = this.tryServe(group, w.req, shape, now, w.joinedAt <= sentAt);
      } catch (err) {
        this.settle(group, w, () => w.reject(err));
        continue;
      }
      if (!served) continue;
      // The first run served is the one the search was made for; every other one shares it.
      if (first) first = false;
      else this.counters.shared++;
      this.settle(group, w, () => w.resolve(served.result));
    }
  }

  private settle(group: Group, w: Waiter, done: () => void): void {
    group.waiters = group.waiters.filter((x) => x !== w);
    w.cancel();
    done();
  }

  private queryFor(base: SearchQuery, cap: number, gpus: Gpus, limit: number, exclude: number[]): SearchQuery {
    const query: SearchQuery = { ...base, dph_total: { lte: cap }, limit };
    if (gpus !== 'any') query['gpu_name'] = { in: [...gpus] };
    if (exclude.length > 0) {
      const ids = (base['id'] ?? {}) as Record<string, unknown>;
      const already = Array.isArray(ids['notin']) ? (ids['notin'] as unknown[]) : [];
      query['id'] = { ...ids, notin: [...new Set([...already, ...exclude])] };
    }
    return query;
  }
}
