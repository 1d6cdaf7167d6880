// The account's instances as the leading daemon's lists showed them, shared through the store
// (issue #21 item 4: "the leader makes the instance lists and every daemon reads their result from
// the store"). The poller (src/daemon/instances/poller.ts) publishes through this when it leads and
// reads through it when it does not.
//
// Times cross machines here: the store keeps the database's clock (as the leases measure it), and
// what is read is dated back on this daemon's clock a little early (`EARLY_MS`), the side on which
// a status counts as older and an absence as dated before an instance made meanwhile, never after.
import { INSTANCE_COLUMNS } from '../../client/marketplace-client.js';
import type { Instance } from '../../client/types.js';
import type { Store } from '../../store/index.js';
import type { Sighting } from '../../store/sightings.js';
import type { LeaseOwner } from './lease-owner.js';

/** What is read is dated this much earlier than written: the error of the clocks' offset, and more. */
const EARLY_MS = 2_000;
/** A reader looks this far back before its mark, for rows whose transaction committed late. */
const OVERLAP_MS = 5_000;
/** Rows of instances no complete sweep has shown for this long are dropped. */
const KEEP_MS = 3_600_000;

export interface SharedViewDeps {
  store: Pick<Store, 'sightings' | 'transaction'>;
  owner: Pick<LeaseOwner, 'now' | 'leader' | 'daemonId' | 'leaseMs' | 'leaderLease' | 'takeLead'>;
  clock: { now(): number };
}

/** The record's fields berth reads (the columns it lists), and nothing else: never env values nor tokens. */
function keptFields(inst: Instance): Sighting['instance'] {
  const out: Record<string, unknown> = {};
  for (const key of INSTANCE_COLUMNS) if (inst[key] !== undefined) out[key] = inst[key];
  return out as Sighting['instance'];
}

export class StoreSharedView {
  /** The latest write this daemon has read (database clock). */
  private mark = 0;
  /** Per instance, the listing last handed over (database clock): rows read twice are handed once. */
  private readonly delivered = new Map<number, number>();
  private lastSweep: number | null = null;
  /** The leader's lease as this daemon first saw it held (database clock): a new leader is given its time. */
  private watched: { owner: string; epoch: number; since: number } | undefined;

  constructor(private readonly deps: SharedViewDeps) {}

  leads(): boolean {
    return this.deps.owner.leader;
  }

  /**
   * Leadership follows the work (issue #38 item 5): a leader cut from the marketplace but not from
   * the store keeps its lease while its sweeps fail, and nobody else sweeps. So when the store's
   * last complete sweep is older than `overdueMs`, and the leader now has held the lead for that
   * long too (a new leader gets its time to sweep), this daemon takes the lead from it. One
   * statement, fenced on the leader's epoch: of several followers, one takes it. A leader is given
   * a lease's length at least (the time after which a dead one's lead would pass anyway): a sweep
   * a little late on a busy machine moves nothing.
   */
  takeLeadIfOverdue(overdueMs: number): boolean {
    const { store, owner } = this.deps;
    const dueMs = Math.max(overdueMs, owner.leaseMs);
    if (owner.leader) return false;
    const lead = owner.leaderLease();
    // Nobody leads: the next renewal of some daemon takes the free lease.
    if (!lead || lead.owner === owner.daemonId) return false;
    const now = owner.now();
    const w = this.watched;
    if (!w || w.owner !== lead.owner || w.epoch !== lead.epoch) this.watched = { owner: lead.owner, epoch: lead.epoch, since: now };
    const last = store.sightings.lastSweep();
    const overdue = (last === null || now - last > dueMs) && now - this.watched!.since > dueMs;
    return overdue && owner.takeLead(lead);
  }

  /** Database time of this daemon's `local` time. */
  private toDb(local: number): number {
    return local + (this.deps.owner.now() - this.deps.clock.now());
  }

  /** This daemon's time of database time `db`, early. */
  private toLocal(db: number): number {
    return db - (this.deps.owner.now() - this.deps.clock.now()) - EARLY_MS;
  }

  publish(instances: Instance[], listedAt: number, sweepStartedAt: number | null): void {
    const { store, owner } = this.deps;
    const kept = instances.map(keptFields);
    const swept = sweepStartedAt === null ? null : this.toDb(sweepStartedAt);
    store.transaction(() => store.sightings.record(kept, this.toDb(listedAt), swept, owner.now()));
  }

  sweepDone(startedAt: number): void {
    this.deps.store.sightings.sweepDone(this.toDb(startedAt), KEEP_MS);
  }

  read(): { seen: Array<{ instances: Instance[]; listedAt: number }>; sweep?: { instances: Instance[]; startedAt: number } } {
    const { sightings } = this.deps.store;
    const byListing = new Map<number, Instance[]>();
    for (const row of sightings.writtenSince(this.mark - OVERLAP_MS)) {
      this.mark = Math.max(this.mark, row.writtenAt);
      if ((this.delivered.get(row.instance.id) ?? Number.NEGATIVE_INFINITY) >= row.listedAt) continue;
      this.delivered.set(row.instance.id, row.listedAt);
      const group = byListing.get(row.listedAt);
      if (group) group.push(row.instance as Instance);
      else byListing.set(row.listedAt, [row.instance as Instance]);
    }
    const seen = [...byListing].sort(([a], [b]) => a - b).map(([listedAt, instances]) => ({ instances, listedAt: this.toLocal(listedAt) }));
    this.forgetOld();
    const last = sightings.lastSweep();
    if (last === null || last === this.lastSweep) return { seen };
    this.lastSweep = last;
    const instances = sightings.sweptSince(last).map((row) => row.instance as Instance);
    return { seen, sweep: { instances, startedAt: this.toLocal(last) } };
  }

  /** Forgets listings an hour older than the mark (their rows come back only when written again, newer). */
  private forgetOld(): void {
    if (this.delivered.size < 10_000) return;
    for (const [id, listedAt] of this.delivered) if (listedAt < this.mark - KEEP_MS) this.delivered.delete(id);
  }
}
