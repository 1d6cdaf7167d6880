// How loudly to report a destroy that did not take (refused, failed, or accepted while the instance
// stays listed). Destroys are retried forever, so a blip is a warning; one that keeps failing may
// leave an instance billing and needs a person: from the ALERT_AFTER-th failure in a row it is
// logged at error level with `ALERT` (docs/operating.md: Logs), for a run's own instance and an orphan alike.
export const ALERT_AFTER = 3;

/** Consecutive failed destroys per instance. */
export class DestroyFailures {
  private readonly counts = new Map<number, number>();

  /** Counts one more failure of this instance's destroy; true once it should raise an ALERT. */
  failed(instanceId: number): boolean {
    const n = (this.counts.get(instanceId) ?? 0) + 1;
    this.counts.set(instanceId, n);
    return n >= ALERT_AFTER;
  }

  count(instanceId: number): number {
    return this.counts.get(instanceId) ?? 0;
  }

  /** The instance is gone (or no longer ours to destroy). */
  clear(instanceId: number): void {
    this.counts.delete(instanceId);
  }
}
