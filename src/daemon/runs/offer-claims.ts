// Which offer each live run of this daemon is trying or holding. Runs with similar specs find the
// same offers in the same order; without this they would race each other to create on the
// cheapest one, and every loser would spend a rate-limited create call (and time) on a 410. A run
// holds at most one offer at a time. In memory only: rebuilt from the store's live attempts at start.
// With several daemons on one store, `elsewhere` (./store-claims.ts) adds the offers other daemons'
// runs are on, read from the store: left out of searches like this daemon's own, and refused at create.
import type { StoreClaims } from './store-claims.js';

export class OfferClaims {
  private readonly holderOf = new Map<number, string>();
  private readonly offerOf = new Map<string, number>();

  constructor(private readonly elsewhere?: Pick<StoreClaims, 'holder' | 'held' | 'heldByOthers' | 'heldByOther'>) {}

  /** Takes the offer for the run (dropping the run's previous claim); false when another run holds it. */
  claim(offerId: number, runId: string): boolean {
    const holder = this.holderOf.get(offerId);
    if (holder !== undefined && holder !== runId) return false;
    this.release(runId);
    this.holderOf.set(offerId, runId);
    this.offerOf.set(runId, offerId);
    return true;
  }

  /**
   * Drops the run's claim; with `onlyOffer`, only if that is still the offer it holds (a run may
   * already have moved on to the next offer when the end of the previous attempt is recorded).
   */
  release(runId: string, onlyOffer?: number): void {
    const offerId = this.offerOf.get(runId);
    if (offerId === undefined || (onlyOffer !== undefined && onlyOffer !== offerId)) return;
    this.offerOf.delete(runId);
    if (this.holderOf.get(offerId) === runId) this.holderOf.delete(offerId);
  }

  /** Offers held by runs other than `runId`, to leave out of its search. */
  heldByOthers(runId: string): number[] {
    const out: number[] = this.elsewhere?.heldByOthers(runId) ?? [];
    for (const [offerId, holder] of this.holderOf) if (holder !== runId) out.push(offerId);
    return out;
  }

  /** Every offer held by a run: left out of shared searches (./search-pool.ts). */
  held(): number[] {
    return [...(this.elsewhere?.held() ?? []), ...this.holderOf.keys()];
  }

  /** The run holding the offer, if it is not `runId`. */
  heldByOther(offerId: number, runId: string): string | undefined {
    const holder = this.holderOf.get(offerId);
    return holder !== undefined && holder !== runId ? holder : this.elsewhere?.heldByOther(offerId, runId);
  }

  /**
   * The run of another daemon (or of this one) whose attempt is on the offer, read from a shared
   * store now; undefined on a store of one daemon. Exact only in the step that writes the intent
   * under the store's caps lock (the create gate's `serialize`).
   */
  holderInStore(offerId: number, runId: string): string | undefined {
    return this.elsewhere?.holder(offerId, runId);
  }
}
