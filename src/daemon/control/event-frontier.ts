// How far the event log may be read without skipping an event, when several daemons write it (one
// Postgres store). Event ids come from a sequence, drawn inside the writing transaction: daemon A
// draws 7, daemon B draws 8 and commits first, and a reader that saw 8 and moved its cursor past it
// would never read 7. So streams read only up to this frontier: the highest id below which every
// id is either present or missing for good.
//
// A missing id (a gap) is either in flight (its transaction has not committed yet) or gone (rolled
// back, or deleted: a folded repeat, retention). A transaction that draws an id holds a write lock
// on the events table until it ends, so a gap already seen counts as gone
// - once no other connection holds that lock (`othersWriting`, asked only while a gap is there):
//   whatever drew it has ended, and the read that follows shows it if it was committed; usually
//   at the next poll;
// - else once it has been a gap for `settleMs`, from the first read that saw an id above it: the
//   bound for a store written to without a pause (no transaction of berth's holds an id that long;
//   Postgres ends one left idle for 60 s).
// Ids present without a gap below them are final at once, so the frontier lags only while a gap
// settles.
//
// One read per advance for all streams: the ids (an index-only scan) above the frontier, which are
// only the new ones unless a gap is settling. While one settles, events above it wait anyway, so a
// commit of this daemon's reads nothing (`advanceIfClear`): only the poll reads the ids again.
import type { Clock } from '../../clock.js';

/** Ids read per query (a frontier far behind catches up in pages). */
const PAGE = 5_000;
/** Ids below the newest one at start that are still looked at for gaps in flight at that moment. */
const LOOK_BACK = 100;

/** What the frontier reads of the events table. */
export interface EventIds {
  /** Whether another connection is in a transaction that writes events now. */
  othersWriting(): boolean;
  /** The ids after `afterId`, ascending, at most `limit`. */
  idsAfter(afterId: number, limit: number): number[];
  /** The newest id (0 when there is none). */
  latestId(): number;
}

export class EventFrontier {
  private frontier: number;
  /** The highest id any read has seen, and when each new high was first seen (only those younger than settleMs). */
  private top: number;
  private highs: Array<{ id: number; at: number }> = [];
  /** The highest id seen at least settleMs ago: every gap below it has settled. */
  private settledTop: number;

  constructor(
    private readonly events: EventIds,
    private readonly clock: Pick<Clock, 'now'>,
    private readonly settleMs: number,
  ) {
    const latest = events.latestId();
    // A transaction in flight now may hold an id just below the newest: the last few are read again.
    this.frontier = Math.max(0, latest - LOOK_BACK);
    this.settledTop = this.frontier;
    this.top = this.frontier;
    this.advance();
  }

  /** Every event with an id up to this one that will ever be stored is stored. */
  get value(): number {
    return this.frontier;
  }

  /**
   * advance(), unless a gap holds the frontier: then nothing above it can be sent before the next
   * poll looks at the gap again, and a commit of this daemon costs no read.
   */
  advanceIfClear(): boolean {
    return this.frontier < this.top ? false : this.advance();
  }

  /** Reads the ids above the frontier and moves it on; true when it moved. */
  advance(): boolean {
    const now = this.clock.now();
    while (this.highs.length > 0 && this.highs[0]!.at <= now - this.settleMs) {
      this.settledTop = Math.max(this.settledTop, this.highs.shift()!.id);
    }
    // Asked before the ids are read: every gap below the highest id seen so far was drawn before
    // now, and with no writer left, the read below shows it if it was ever committed.
    if (this.frontier < this.top && !this.events.othersWriting()) this.settledTop = Math.max(this.settledTop, this.top);
    const start = this.frontier;
    let f = this.frontier;
    let seen = this.top;
    for (;;) {
      const ids = this.events.idsAfter(f, PAGE);
      let blocked = false;
      for (const id of ids) {
        seen = Math.max(seen, id);
        // ids f+1 .. id-1 are missing: past them only once each has been missing for settleMs.
        if (id > f + 1 && id - 1 > this.settledTop) {
          f = Math.max(f, this.settledTop);
          blocked = true;
          break;
        }
        f = id;
      }
      if (blocked) {
        seen = Math.max(seen, ids[ids.length - 1]!);
        break;
      }
      if (ids.length < PAGE) break;
    }
    if (seen > this.top) {
      this.top = seen;
      this.highs.push({ id: seen, at: now });
    }
    this.frontier = f;
    return f > start;
  }
}
