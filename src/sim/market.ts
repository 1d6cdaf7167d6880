// Competing bids, modelled as each machine's minimum bid over sim time. An interruptible instance
// whose bid is below its offer's current `min_bid` loses the machine (instances.ts stops it as
// outbid); when the minimum falls back to or below its bid, or its bid is raised, it resumes.
//
// A machine's minimum bid is the catalog's `min_bid` of each offer times the machine's factor:
//   - a schedule (`bids.markets[machine]`, else `bids.default_market`): `raise_pct` at `at_s`, and
//     again every `every_s` if given. Under the default market each machine's steps are shifted by
//     a seeded fraction of `every_s`, so machines do not all move at once;
//   - hand raises (admin route, `raiseMinBid`): a factor from the moment of the raise on.
// It never exceeds the offer's on-demand `dph_base`: on-demand renters take priority over any bid,
// so no bidder pays more than that for the machine.
import type { SimOffer } from './catalog.js';
import type { SimConfig } from './config.js';
import { round } from './pricing.js';
import { hashUnit } from './prng.js';

export type MarketSpec = NonNullable<SimConfig['bids']['default_market']>;

interface HandRaise {
  at: number;
  factor: number;
}

export class Market {
  private readonly specs = new Map<number, MarketSpec>();
  private readonly raises = new Map<number, HandRaise[]>();
  /** The catalog's own minimum bids, before any market moved them. */
  private readonly base = new Map<number, number>();
  private readonly defaultSpec: MarketSpec | null;

  constructor(
    private readonly seed: number,
    cfg: SimConfig['bids'],
    offers: readonly SimOffer[],
  ) {
    for (const [id, spec] of Object.entries(cfg.markets)) this.specs.set(Number(id), spec);
    this.defaultSpec = cfg.default_market;
    for (const o of offers) this.base.set(o.id, o.min_bid);
  }

  /** Whether this machine's minimum bid can move at all (so that idle machines cost nothing). */
  moves(machineId: number): boolean {
    return this.defaultSpec !== null || this.specs.has(machineId) || this.raises.has(machineId);
  }

  /** Machines with a schedule of their own or a hand raise (the default market moves all others). */
  movingMachines(): number[] {
    return [...new Set([...this.specs.keys(), ...this.raises.keys()])];
  }

  get hasDefault(): boolean {
    return this.defaultSpec !== null;
  }

  /** The offer's minimum bid at sim second `t`. */
  minBid(offer: SimOffer, t: number): number {
    const base = this.base.get(offer.id) ?? offer.min_bid;
    if (!this.moves(offer.machine_id)) return base;
    return Math.min(offer.dph_base, round(base * this.factor(offer.machine_id, t), 4));
  }

  /** From sim second `t` on, the machine's minimum bids are `1 + pct/100` times what they were. */
  raise(machineId: number, t: number, pct: number): void {
    const list = this.raises.get(machineId) ?? [];
    list.push({ at: t, factor: 1 + pct / 100 });
    this.raises.set(machineId, list);
  }

  /** The moments in (from, to] at which the machine's minimum bid may change, in order. */
  stepsBetween(machineId: number, from: number, to: number): number[] {
    const out: number[] = [];
    const spec = this.specFor(machineId);
    if (spec) {
      const first = spec.at_s + this.shift(machineId, spec);
      if (spec.every_s === undefined) {
        if (first > from && first <= to) out.push(first);
      } else {
        const k0 = Math.max(0, Math.floor((from - first) / spec.every_s) + 1);
        for (let k = k0; first + k * spec.every_s <= to; k++) out.push(first + k * spec.every_s);
      }
    }
    for (const r of this.raises.get(machineId) ?? []) if (r.at > from && r.at <= to) out.push(r.at);
    return out.sort((a, b) => a - b);
  }

  private factor(machineId: number, t: number): number {
    let f = 1;
    const spec = this.specFor(machineId);
    if (spec) {
      const first = spec.at_s + this.shift(machineId, spec);
      const n = t < first ? 0 : spec.every_s === undefined ? 1 : 1 + Math.floor((t - first) / spec.every_s);
      f *= (1 + spec.raise_pct / 100) ** n;
    }
    for (const r of this.raises.get(machineId) ?? []) if (r.at <= t) f *= r.factor;
    return f;
  }

  private specFor(machineId: number): MarketSpec | null {
    return this.specs.get(machineId) ?? this.defaultSpec;
  }

  /** The default market's seeded per-machine offset within one period. */
  private shift(machineId: number, spec: MarketSpec): number {
    if (this.specs.has(machineId) || spec.every_s === undefined) return 0;
    return hashUnit(this.seed, machineId, 0xb1d) * spec.every_s;
  }
}
