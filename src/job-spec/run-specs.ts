// The one port through which the daemon's parts read a live run's plan: the run actors, the money
// guard, the create gate and the failure logs. The supervisor keeps the plans (made once, at
// submission, or read once from the store when a run resumes) and hands this view down; a Map of
// run id to plan is one.
import type { RunPlan } from './run-plan.js';

export interface RunSpecs<S = RunPlan> {
  /** The plan of a run the daemon drives; undefined once it ended, or for a run it does not drive. */
  get(runId: string): S | undefined;
}
