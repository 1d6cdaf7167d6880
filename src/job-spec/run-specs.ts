// The one port through which the daemon's parts read a live run's resolved spec: the run actors,
// the money guard, the create gate and the failure logs. The supervisor keeps the specs (resolved
// once, at submission, or read once from the store when a run resumes) and hands this view down;
// a Map of run id to spec is one.
import type { ResolvedJobSpec } from './schema.js';

export interface RunSpecs<S = ResolvedJobSpec> {
  /** The resolved spec of a run the daemon drives; undefined once it ended, or for a run it does not drive. */
  get(runId: string): S | undefined;
}
