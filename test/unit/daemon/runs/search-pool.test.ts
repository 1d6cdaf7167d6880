// The shared search (#20 items 1-2) on a fake clock and a scripted search: how many searches, what
// each one asked for, and which run was handed which offer.
import { beforeEach, describe, expect, it } from 'vitest';
import type { Offer, SearchQuery } from '../../../../src/client/types.js';
import { OfferClaims } from '../../../../src/daemon/runs/offer-claims.js';
import { SearchPool, type PoolRequest } from '../../../../src/daemon/runs/search-pool.js';
import type { ResolvedJobSpec } from '../../../../src/job-spec/schema.js';
import { parseJobSpec } from '../../../../src/job-spec/validate.js';
import { planRun } from '../../../../src/job-spec/run-plan.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const RUNS = {
  max_attempts: 3,
  boot_timeout_s: 60,
  deadline_s: 600,
  destroy_retry_max_delay_s: 5,
  outage_backoff_s: 1,
  gone_offers_per_search: 4,
  machine_quarantine_s: 0,
  rebid_wait_s: 30,
  idle_warning_s: 300,
  search_share_s: 30,
  relax: [],
};

function specOf(extra: Record<string, unknown> = {}): ResolvedJobSpec {
  return planRun(parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1, ...extra }), RUNS);
}

const GPUS = ['RTX 4090', 'RTX 3090', 'A100'];
/** 100 offers, cheapest first by id: price 0.1 + id/200, GPU by id. */
const CATALOG: Offer[] = Array.from({ length: 100 }, (_, i) => ({
  id: i + 1,
  machine_id: 1000 + i,
  gpu_name: GPUS[i % 3]!,
  num_gpus: 1,
  gpu_ram: 24_000,
  dph_total: 0.1 + (i + 1) / 200,
  direct_port_count: 2,
}));

/** A service search over CATALOG honouring the filters the pool may send; each call is recorded. */
class FakeSearch {
  readonly queries: SearchQuery[] = [];
  private gate: Promise<void> | undefined;
  private open: (() => void) | undefined;
  /** Holds every search until release(). */
  hold(): void {
    this.gate = new Promise((r) => (this.open = r));
  }
  release(): void {
    this.open?.();
    this.gate = undefined;
  }
  readonly search = async (q: SearchQuery): Promise<Offer[]> => {
    this.queries.push(q);
    if (this.gate) await this.gate;
    const cap = (q['dph_total'] as { lte: number }).lte;
    const names = (q['gpu_name'] as { in?: string[] } | undefined)?.in;
    const notin = new Set((q['id'] as { notin?: number[] } | undefined)?.notin ?? []);
    return CATALOG.filter((o) => o.dph_total <= cap && (!names || names.includes(o.gpu_name)) && !notin.has(o.id)).slice(0, q.limit ?? 64);
  };
}

let clock: FakeClock;
let claims: OfferClaims;
let fake: FakeSearch;
let pool: SearchPool;

beforeEach(() => {
  clock = new FakeClock(0);
  claims = new OfferClaims();
  fake = new FakeSearch();
  pool = new SearchPool({ search: fake.search, clock, claims, maxAgeMs: 30_000, perAnswer: 3 });
});

/** A request that takes the first usable offer, as the run actor does, and answers its id (or null). */
function ask(runId: string, spec = specOf(), blocked: number[] = []): Promise<number | null> {
  const req: PoolRequest<number | null> = {
    runId,
    spec,
    relaxLevel: 0,
    blocked: { offerIds: blocked, machineIds: [] },
    choose: (usable) => ({ take: usable.slice(0, 1).map((o) => o.id), result: usable[0]?.id ?? null }),
  };
  return pool.offersFor(req);
}

const runs = (n: number, prefix = 'r') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe('search pool', () => {
  it('30 runs of one spec share one search, and no two runs are handed one offer', async () => {
    const got = await Promise.all(runs(30).map((id) => ask(id)));
    expect(fake.queries).toHaveLength(1);
    expect(new Set(got).size).toBe(30);
    expect(got.every((id) => id !== null)).toBe(true);
    expect(pool.stats()).toEqual({ searches: 1, shared: 29 });
  });

  it("offers other daemons' runs are on (a shared store) are left out of the search, and one taken since the answer is not handed", async () => {
    const elsewhere = new Set([1, 2]);
    claims = new OfferClaims({
      held: () => [...elsewhere],
      heldByOthers: () => [...elsewhere],
      heldByOther: (id) => (elsewhere.has(id) ? 'run-of-b' : undefined),
      holder: () => undefined,
    });
    pool = new SearchPool({ search: fake.search, clock, claims, maxAgeMs: 30_000, perAnswer: 3 });
    expect(await ask('a')).toBe(3);
    expect((fake.queries[0]!['id'] as { notin: number[] }).notin).toEqual(expect.arrayContaining([1, 2]));
    // Another daemon's run goes for offer 4 after the answer was made: the next run here skips it.
    elsewhere.add(4);
    expect(await ask('b')).toBe(5);
    expect(fake.queries).toHaveLength(1);
  });

  it('a fresh answer serves a later run without a search; an answer older than the share age does not', async () => {
    await ask('a');
    await clock.advance(29_000);
    expect(await ask('b')).toBe(2);
    expect(fake.queries).toHaveLength(1);
    await clock.advance(2_000);
    await ask('c');
    expect(fake.queries).toHaveLength(2);
  });

  it('an answer that runs out makes ONE new search for every run that ran out, leaving out the offers handed out and claimed', async () => {
    const small = specOf({ search: { limit: 10 } });
    const first = (await Promise.all(runs(10).map((id) => ask(id, small)))).map(Number);
    expect(fake.queries).toHaveLength(1);
    claims.claim(first[0]!, 'r0');
    const more = await Promise.all(runs(8, 'late').map((id) => ask(id, small)));
    expect(fake.queries).toHaveLength(2);
    expect((fake.queries[1]!['id'] as { notin: number[] }).notin.sort((a, b) => a - b)).toEqual(first.sort((a, b) => a - b));
    expect(more.filter((id) => first.includes(Number(id)))).toEqual([]);
    expect(new Set(more).size).toBe(8);
  });

  it("a run asking again gets the next offer, and its blocked offers stay out of the group's next search", async () => {
    const a1 = await ask('a');
    const a2 = await ask('a', specOf(), [a1!]);
    expect(a2).not.toBe(a1);
    expect(fake.queries).toHaveLength(1);
  });

  it('a run is handed at most perAnswer offers from one answer, then waits for the next search (gone offers stay bounded)', async () => {
    const tried: number[] = [];
    for (let i = 0; i < 4; i++) tried.push((await ask('a', specOf(), tried))!);
    expect(new Set(tried).size).toBe(4);
    // Three from the first answer, the fourth from a second search.
    expect(fake.queries).toHaveLength(2);
  });

  it('a tighter price cap and a subset of GPU names share a wider search, and each run is handed only what its own spec allows', async () => {
    fake.hold();
    const wide = ask('wide', specOf({ search: { filters: { gpu_name: { in: ['RTX 4090', 'RTX 3090'] } } } }));
    const narrow = Array.from({ length: 5 }, (_, i) =>
      ask(`narrow${i}`, specOf({ max_price_per_hour: 0.2, search: { filters: { gpu_name: { eq: 'RTX_3090' } } } })),
    );
    fake.release();
    const [w, ...n] = await Promise.all([wide, ...narrow]);
    // The first search went out for "wide" alone; the narrow runs are covered by its answer.
    expect(fake.queries).toHaveLength(1);
    const byId = new Map(CATALOG.map((o) => [o.id, o]));
    expect(byId.get(w!)!.gpu_name).toMatch(/RTX (4090|3090)/);
    const narrowOffers = n.filter((id) => id !== null).map((id) => byId.get(id!)!);
    expect(narrowOffers.length).toBeGreaterThan(0);
    for (const o of narrowOffers) {
      expect(o.gpu_name).toBe('RTX 3090');
      expect(o.dph_total).toBeLessThanOrEqual(0.2);
    }
  });

  it('a wider cap is not served by a narrower answer: the next search covers the widest waiting run', async () => {
    await ask('cheap', specOf({ max_price_per_hour: 0.2 }));
    await ask('dear', specOf({ max_price_per_hour: 0.9 }));
    expect(fake.queries).toHaveLength(2);
    expect(fake.queries[1]!['dph_total']).toEqual({ lte: 0.9 });
  });

  it('a filter berth cannot re-check is never widened: another value is another search', async () => {
    await Promise.all([
      ask('a', specOf({ search: { filters: { gpu_ram: { gte: 20_000 } } } })),
      ask('b', specOf({ search: { filters: { gpu_ram: { gte: 40_000 } } } })),
    ]);
    expect(fake.queries).toHaveLength(2);
    expect(fake.queries.map((q) => q['gpu_ram'])).toEqual([{ gte: 20_000 }, { gte: 40_000 }]);
  });

  it('the next search goes to the query whose run has waited longest, not to the latest burst', async () => {
    const burstSpec = specOf({ search: { filters: { gpu_ram: { gte: 10_000 } } } });
    // The burst's query was searched before (its group is the oldest), but that answer is stale.
    await ask('seed', burstSpec);
    await clock.advance(31_000);
    fake.hold();
    const busy = ask('first', specOf({ search: { filters: { num_gpus: { eq: 1 } } } }));
    await clock.advance(1000);
    const old = ask('old', specOf({ search: { filters: { gpu_ram: { gte: 20_000 } } } }));
    await clock.advance(1000);
    const burst = runs(20, 'burst').map((id) => ask(id, burstSpec));
    fake.release();
    fake.hold();
    await busy;
    await clock.settle();
    expect(fake.queries.map((q) => q['gpu_ram'])).toEqual([{ gte: 10_000 }, undefined, { gte: 20_000 }]);
    fake.release();
    await Promise.all([old, ...burst]);
    expect(fake.queries).toHaveLength(4);
  });

  it('more runs at once than one answer holds: the runs the answer could not serve wait for the next search, none is answered "no offer"', async () => {
    const small = specOf({ search: { limit: 10 } });
    const got = await Promise.all(runs(30).map((id) => ask(id, small)));
    expect(got.filter((id) => id === null)).toEqual([]);
    expect(new Set(got).size).toBe(30);
    expect(fake.queries).toHaveLength(3);
  });

  it('an answer made after the run asked is final even when empty: the run relaxes instead of searching again', async () => {
    const none = await ask('a', specOf({ max_price_per_hour: 0.05 }));
    expect(none).toBeNull();
    expect(fake.queries).toHaveLength(1);
  });

  it("a wider answer that came back full and holds nothing under a cheaper run's cap is not final for it: that run gets a search of its own (issue #31 item 11)", async () => {
    // The shared order puts the dearest first (say by performance): a full answer under the widest
    // cap can leave out every offer a cheaper run could take.
    const dearFirst = new FakeSearch();
    const search = async (q: SearchQuery) => (await dearFirst.search({ ...q, limit: 100 })).reverse().slice(0, q.limit ?? 64);
    const price = (id: number | null) => CATALOG.find((o) => o.id === id)!.dph_total;
    const top = (cap: number) => specOf({ max_price_per_hour: cap, search: { limit: 10 } });

    // Runs waiting together: one search under the widest cap, then one of the cheap run's own.
    pool = new SearchPool({ search, clock, claims, maxAgeMs: 30_000, perAnswer: 3 });
    dearFirst.hold();
    const dear = ask('dear', top(0.9));
    const cheap = ask('cheap', top(0.2));
    dearFirst.release();
    const [d, c] = await Promise.all([dear, cheap]);
    expect(price(d)).toBeGreaterThan(0.5);
    expect(c).not.toBeNull();
    expect(price(c)).toBeLessThanOrEqual(0.2);
    expect(dearFirst.queries.map((q) => q['dph_total'])).toEqual([{ lte: 0.9 }, { lte: 0.2 }]);

    // A fresh wide answer does not answer a cheap run that asks later "no offer" either.
    pool = new SearchPool({ search, clock, claims: new OfferClaims(), maxAgeMs: 30_000, perAnswer: 3 });
    expect(price(await ask('dear2', top(0.9)))).toBeGreaterThan(0.5);
    const later = await ask('later', top(0.2));
    expect(later).not.toBeNull();
    expect(price(later)).toBeLessThanOrEqual(0.2);
    expect(dearFirst.queries.slice(2).map((q) => q['dph_total'])).toEqual([{ lte: 0.9 }, { lte: 0.2 }]);
    // An answer of its own that was not full is final: nothing under the cap exists.
    expect(await ask('none', top(0.05))).toBeNull();
    expect(dearFirst.queries.slice(4).map((q) => q['dph_total'])).toEqual([{ lte: 0.05 }]);
  });

  it('a failed search fails every run that waited on it, and the next request searches again', async () => {
    const failing = new SearchPool({
      search: () => Promise.reject(new Error('outage')),
      clock,
      claims,
      maxAgeMs: 30_000,
      perAnswer: 3,
    });
    const req = (runId: string): PoolRequest<null> => ({
      runId,
      spec: specOf(),
      relaxLevel: 0,
      blocked: { offerIds: [], machineIds: [] },
      choose: () => ({ take: [], result: null }),
    });
    const results = await Promise.allSettled([failing.offersFor(req('a')), failing.offersFor(req('b'))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(failing.stats().searches).toBe(1);
    await expect(failing.offersFor(req('a'))).rejects.toThrow('outage');
    expect(failing.stats().searches).toBe(2);
  });

  it('a cancelled run stops waiting at once', async () => {
    fake.hold();
    void ask('a');
    const ac = new AbortController();
    const req: PoolRequest<null> = {
      runId: 'b',
      spec: specOf({ max_price_per_hour: 0.9 }),
      relaxLevel: 0,
      blocked: { offerIds: [], machineIds: [] },
      choose: () => ({ take: [], result: null }),
    };
    const waiting = pool.offersFor(req, ac.signal);
    ac.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'aborted' });
    fake.release();
  });

  it('a search nobody waits for any more is aborted, so that a stopping daemon is not held up by it', async () => {
    let aborted = false;
    const hanging = new SearchPool({
      search: (_q, signal) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(new Error('aborted'));
          }),
        ),
      clock,
      claims,
      maxAgeMs: 30_000,
      perAnswer: 3,
    });
    const ac = new AbortController();
    const req: PoolRequest<null> = {
      runId: 'a',
      spec: specOf(),
      relaxLevel: 0,
      blocked: { offerIds: [], machineIds: [] },
      choose: () => ({ take: [], result: null }),
    };
    const waiting = hanging.offersFor(req, ac.signal);
    ac.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'aborted' });
    expect(aborted).toBe(true);
  });
});
