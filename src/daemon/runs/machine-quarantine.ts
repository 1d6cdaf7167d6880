// Machines that just failed an attempt of any run of this daemon (exited, unknown, offline, boot
// timeout, lost). Each run blocks such a machine for itself (SPEC 4.1); this shares the lesson with
// the daemon's other runs for a while, by trying those machines' offers last. It only reorders
// candidates and never removes them, so it can never make a run fail for lack of offers.
import type { Clock } from '../../clock.js';

export class MachineQuarantine {
  private readonly until = new Map<number, number>();

  constructor(
    private readonly ttlMs: number,
    private readonly clock: Pick<Clock, 'now'>,
  ) {}

  note(machineId: number): void {
    this.until.set(machineId, this.clock.now() + this.ttlMs);
  }

  has(machineId: number): boolean {
    const t = this.until.get(machineId);
    if (t === undefined) return false;
    if (t > this.clock.now()) return true;
    this.until.delete(machineId);
    return false;
  }

  /** The same items, machines in quarantine last, order otherwise kept. */
  lastIfQuarantined<T>(items: T[], machineOf: (item: T) => number): T[] {
    const healthy = items.filter((i) => !this.has(machineOf(i)));
    return healthy.length === items.length ? items : [...healthy, ...items.filter((i) => this.has(machineOf(i)))];
  }
}
