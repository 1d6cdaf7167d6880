// Offers the runs of other daemons are on, when several daemons share one store (issue #21).
// OfferClaims keeps one daemon's runs off each other's offers in memory; across daemons the
// attempts table is the record: an attempt of a live run that has no outcome yet (its create's
// intent is written, or its instance boots) is on its offer, exactly as a local claim holds it.
// Without this, runs on different daemons race for the same cheapest offer, and every loser spends
// a rate-limited create call on a 410.
//
// Two reads:
//   holder()  exact, at create time: called in the step that writes the intent under the store's
//             caps lock (../money/create-gate.ts `serialize`), so of two daemons going for one
//             offer the second always sees the first's intent;
//   held()    cached for `maxAgeMs`: the offers searches leave out and runs are not handed, so a
//             run rarely even gets to the create of such an offer. One query per daemon per
//             `maxAgeMs` however many runs search; a store that does not answer leaves the last
//             answer in place (the exact read still guards the create).
import type { Clock } from '../../clock.js';
import type { Store } from '../../store/index.js';

export interface StoreClaimsDeps {
  attempts: Pick<Store['attempts'], 'onOffers' | 'onOffer'>;
  clock: Pick<Clock, 'now'>;
  /** How long one read of the held offers serves, ms. */
  maxAgeMs: number;
}

export class StoreClaims {
  private rows: ReadonlyArray<{ offer_id: number; run_id: string }> = [];
  private readAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly deps: StoreClaimsDeps) {}

  /** The run other than `runId` whose attempt is on the offer now, read from the store (not cached). */
  holder(offerId: number, runId: string): string | undefined {
    return this.deps.attempts.onOffer(offerId, runId);
  }

  /** Offers the attempts of runs other than `runId` are on (as of at most `maxAgeMs` ago). */
  heldByOthers(runId: string): number[] {
    return this.fresh()
      .filter((r) => r.run_id !== runId)
      .map((r) => r.offer_id);
  }

  /** Offers any run's attempt is on (as of at most `maxAgeMs` ago). */
  held(): number[] {
    return this.fresh().map((r) => r.offer_id);
  }

  /** The run other than `runId` on the offer, as of the last read. */
  heldByOther(offerId: number, runId: string): string | undefined {
    return this.fresh().find((r) => r.offer_id === offerId && r.run_id !== runId)?.run_id;
  }

  private fresh(): ReadonlyArray<{ offer_id: number; run_id: string }> {
    const now = this.deps.clock.now();
    if (now - this.readAt < this.deps.maxAgeMs) return this.rows;
    this.readAt = now;
    try {
      this.rows = this.deps.attempts.onOffers();
    } catch {
      // The store does not answer: the last read stands (the create's exact read still guards it).
    }
    return this.rows;
  }
}
