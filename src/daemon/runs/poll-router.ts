// The poll router: the shared poller's subscriber (../instances/poller.ts PollSubscriber), between the
// account's lists and the runs driven here. It decides
// - which instances each run waits on (`waited`): a booting run's for a status other than loading, a
//   rebidding or destroying run's for any change or its absence, a running task's for its end, and
//   the instance of a run taken but not yet confirmed by a list (./shared-placement.ts);
// - which task runs' logs the task probe reads (`probeTargets`, asked by the probe on its own
//   schedule, ../task-end/task-probe.ts): both are questions, answered and nothing else;
// - which list answers which run: a list that showed, left out or answered for a run's instance is
//   handed to that run's driver (and confirms the run to its placement); a complete sweep that never
//   showed it counts as its absence, and then goes on to the reconciler (./reconciler.ts);
// - what an instance the service says stopped (a webhook: outbid, offline) means: the run holding it
//   acts at once, with an event saying what the service reported.
// It keeps nothing of its own: it reads the supervisor's drivers (./supervisor.ts) through
// `PolledRuns`, and asks the placement whether a run is confirmed yet.
import type { Instance } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import type { RunPlan } from '../../job-spec/run-plan.js';
import type { Store } from '../../store/index.js';
import type { PollSubscriber } from '../instances/poller.js';
import type { IdleWatch } from '../task-end/idle-watch.js';
import { toStatus } from '../instances/instance-status.js';
import type { Reconciler } from '../instances/reconciler.js';
import type { RunDriver } from './run-driver.js';
import type { RunPlacement } from './run-placement.js';

/** What the router asks of one run's driver. */
type PolledDriver = Pick<RunDriver, 'runId' | 'state' | 'isEnded' | 'currentInstanceId' | 'taskProbeTarget' | 'poll' | 'serviceSays'>;

/** What the router reads of the runs driven here (the supervisor's registry of drivers). */
interface PolledRuns {
  /** The drivers of the runs driven here now. */
  drivers(): Iterable<PolledDriver>;
}

export interface PollRouterDeps {
  store: Store;
  clock: Clock;
  runs: PolledRuns;
  /** The plans of the live runs (whether a run is a task; its idle limit). */
  specs: ReadonlyMap<string, RunPlan>;
  /** Whether a run taken here is confirmed by a list yet (./run-placement.ts). */
  placement: Pick<RunPlacement, 'unconfirmed' | 'confirmed'>;
  /** Hears every complete sweep of the account (adoption, orphans). */
  reconciler: Pick<Reconciler, 'sweep'>;
  /** Idle autostop: reads the same lists (gpu_util) for running runs. */
  idle: Pick<IdleWatch, 'observe'>;
}

/**
 * Run states in which a run waits on the poller: for its instance to run (again, after a rebid), to
 * be gone, or (collecting a task's outputs) to show it stopped for a cloud copy, so that its spend
 * drops to the disk's price from the stop on; a failed task's kept instance (`keeping`) for its
 * absence (its container's backstop destroys it at the keep's bound when no daemon does).
 */
const WAITING_STATES = new Set(['booting', 'rebidding', 'collecting', 'keeping', 'destroying']);

export class PollRouter implements PollSubscriber {
  constructor(private readonly deps: PollRouterDeps) {}

  /** The instances runs wait on: the poller lists these by id (running tasks' by status) every interval. */
  waited(): { forStatus: number[]; forAbsence: number[]; forEnd: number[] } {
    const { specs, placement } = this.deps;
    const forStatus: number[] = [];
    const forAbsence: number[] = [];
    const forEnd: number[] = [];
    for (const driver of this.deps.runs.drivers()) {
      const id = driver.currentInstanceId();
      if (id === null) continue;
      const task = specs.get(driver.runId)?.task != null;
      // A running task ends by stopping its own instance: watched for that every interval.
      if (driver.state === 'running' && task) forEnd.push(id);
      if (!WAITING_STATES.has(driver.state)) {
        if (placement.unconfirmed(driver.runId)) (driver.state === 'running' ? forEnd : forStatus).push(id);
        continue;
      }
      (driver.state === 'booting' || driver.state === 'collecting' ? forStatus : forAbsence).push(id);
    }
    return { forStatus, forAbsence, forEnd };
  }

  /** The task runs whose instance was last listed running their task: the attempts the task probe reads. */
  probeTargets(): Array<{ runId: string; n: number; instanceId: number }> {
    const tasks: Array<{ runId: string; n: number; instanceId: number }> = [];
    for (const driver of this.deps.runs.drivers()) {
      if (this.deps.specs.get(driver.runId)?.task == null) continue;
      const target = driver.taskProbeTarget();
      if (target) tasks.push(target);
    }
    return tasks;
  }

  /** A list showed these instances: each run holding one hears its status. */
  onSeen(instances: Instance[], listedAt: number): void {
    const held = this.driversByInstance();
    for (const inst of instances) {
      const driver = held.get(inst.id);
      if (!driver) continue;
      this.deps.placement.confirmed(driver.runId, listedAt);
      driver.poll(toStatus(inst), listedAt);
      // Idle autostop reads the same lists (gpu_util): a run that is running, with its spec's limit.
      const spec = this.deps.specs.get(driver.runId);
      if (spec && driver.state === 'running' && !driver.isEnded) this.deps.idle.observe(driver.runId, spec.idle, inst, listedAt);
    }
  }

  /** A list asked for these running instances and showed those no longer running: the others are answered for. */
  onCovered(ids: number[], listedAt: number): void {
    const held = this.driversByInstance();
    for (const id of ids) {
      const driver = held.get(id);
      if (driver) this.deps.placement.confirmed(driver.runId, listedAt);
    }
  }

  /** A list filtered on these ids did not show them: their runs hear the absence (counted by the machine). */
  onAbsent(ids: number[], listedAt: number): void {
    const held = this.driversByInstance();
    for (const id of ids) {
      const driver = held.get(id);
      if (driver) this.deps.placement.confirmed(driver.runId, listedAt);
      driver?.poll(null, listedAt);
    }
  }

  /**
   * A complete sweep of the account: runs whose instance it never showed hear the absence (dated
   * from the sweep's start, so an instance made later is not counted missing); then the reconciler
   * adopts journaled creates and destroys orphans. Statuses of listed instances were handed over
   * page by page already.
   */
  onSweep(instances: Instance[], startedAt: number): void {
    const listed = new Set(instances.map((inst) => inst.id));
    for (const [id, driver] of this.driversByInstance()) {
      this.deps.placement.confirmed(driver.runId, startedAt);
      if (!listed.has(id)) driver.poll(null, startedAt);
    }
    this.deps.reconciler.sweep(instances, startedAt);
  }

  /**
   * A webhook says instance `instanceId` was outbid (`stopped`) or went offline: the run holding it
   * acts at once, as if a list had shown it so, with an event saying what the service reported.
   * Returns that run, or null when none holds it (or the event is older than its last bid).
   */
  serviceSays(instanceId: number, status: 'stopped' | 'offline', eventAt: number, why: string, eventId: string): string | null {
    const driver = this.driversByInstance().get(instanceId);
    if (!driver) return null;
    const { store, clock } = this.deps;
    const note = () => {
      try {
        store.transaction(() =>
          store.events.append({
            runId: driver.runId,
            at: clock.now(),
            type: 'webhook',
            message: why,
            data: { instanceId, eventId, status },
          }),
        );
      } catch {
        // The run's own write that follows pauses it if the store refuses writes; the lists decide then.
      }
    };
    return driver.serviceSays(instanceId, status, eventAt, why, note) ? driver.runId : null;
  }

  private driversByInstance(): Map<number, PolledDriver> {
    const held = new Map<number, PolledDriver>();
    for (const driver of this.deps.runs.drivers()) {
      const id = driver.currentInstanceId();
      if (id !== null) held.set(id, driver);
    }
    return held;
  }
}
