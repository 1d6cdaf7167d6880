// Machines that just failed an attempt of any run of this daemon (exited, unknown, offline, boot
// timeout, lost). Each run blocks such a machine for itself (SPEC 4.1); this shares the lesson with
// the daemon's other runs for a while, by trying those machines' offers last. It only reorders
// candidates and never removes them, so it can never make a run fail for lack of offers.
export class MachineQuarantine {
  private readonly until = new Map<number, number>();

  constructor(private readonly ttlMs: number) {}

  note(machineId: number, now = Date.now()): void {
    this.until.set(machineId, now + this.ttlMs);
  }

  has(machineId: number, now = Date.now()): boolean {
    const t = this.until.get(machineId);
    if (t === undefined) return false;
    if (t > now) return true;
    this.until.delete(machineId);
    return false;
  }

  /** The same items, machines in quarantine last, order otherwise kept. */
  lastIfQuarantined<T>(items: T[], machineOf: (item: T) => number, now = Date.now()): T[] {
    const healthy = items.filter((i) => !this.has(machineOf(i), now));
    return healthy.length === items.length ? items : [...healthy, ...items.filter((i) => this.has(machineOf(i), now))];
  }
}
