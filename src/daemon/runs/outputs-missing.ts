// Whether an ended run's task outputs were all taken, and if not why and what to do (issue #48 item
// 3): one reading for the run object (`outputs_missing`: `berth status`, `submit --wait`, the
// dashboard, `berth outputs`) and the run's end event (its notification). Only the last attempt
// that had an instance counts: an earlier one's task failed and ran again, and the run's result is
// the last one's. A cloud copy that finished is taken whole.
import type { RunOutputsMissing } from '../../wire/control-api.js';

interface AttemptFacts {
  n: number;
  instance_id: number | null;
  outcome: string | null;
  detail: string | null;
  ready_at: number | null;
}
interface OutputsFacts {
  attempt: number;
  state: string;
  detail: string | null;
}

/** Where the cause is not one with a fix of its own. */
const SEE_EVENTS = (runId: string) => `\`berth events ${runId}\` says what happened`;

/**
 * The mark of an ended run whose spec names outputs and whose last attempt did not keep them all;
 * null for a live run, a run without outputs, a run that never rented, or outputs all taken.
 */
export function outputsMissing(
  run: { id: string; state: string; ended: boolean; outputs: boolean },
  attempts: readonly AttemptFacts[],
  outputs: readonly OutputsFacts[],
): RunOutputsMissing | null {
  if (!run.outputs || !run.ended) return null;
  const last = attempts.findLast((a) => a.instance_id !== null);
  if (!last) return null;
  const row = outputs.find((o) => o.attempt === last.n);
  const n = last.n;
  if (row?.state === 'kept' || row?.state === 'copied') return null;
  if (row === undefined) {
    if (last.ready_at === null)
      return {
        attempt: n,
        state: 'not_taken',
        cause: `attempt ${n} ended before its task ran (${last.outcome ?? 'ended'}), so it left none`,
        fix: SEE_EVENTS(run.id),
      };
    if (run.state === 'cancelled')
      return {
        attempt: n,
        state: 'not_taken',
        cause: `the run was cancelled without them (\`berth cancel --no-outputs\`, or a second cancel)`,
        fix: `a plain \`berth cancel ${run.id}\` stops the task and takes them first`,
      };
    return {
      attempt: n,
      state: 'not_taken',
      cause: `attempt ${n} ended (${last.outcome ?? 'ended'}${last.detail ? `: ${last.detail}` : ''}) before berth could take them`,
      fix: SEE_EVENTS(run.id),
    };
  }
  const detail = row.detail ?? '';
  if (row.state === 'collecting' || row.state === 'copying')
    return {
      attempt: n,
      state: 'unfinished',
      cause: `the transfer of attempt ${n}'s outputs never finished (the instance went while it ran)`,
      fix: SEE_EVENTS(run.id),
    };
  if (row.state === 'failed')
    return {
      attempt: n,
      state: 'failed',
      cause: `none came from attempt ${n}: ${detail || 'no file at the outputs paths'}`,
      fix: /stopped/.test(detail)
        ? 'keep the daemon running until the task ends (it takes them before the instance stops), or name an `outputs.cloud` connection, which copies from a stopped instance'
        : /not in the container|no file/.test(detail)
          ? 'check that the task writes them at the paths its spec names (relative ones under /root/workdir)'
          : SEE_EVENTS(run.id),
    };
  return {
    attempt: n,
    state: 'partial',
    cause: `attempt ${n}'s came in part: ${detail || 'some did not come'}`,
    fix: /outputs_max_mb/.test(detail)
      ? 'raise files.outputs_max_mb, or write less'
      : /not in the container/.test(detail)
        ? 'check that the task writes them at the paths its spec names (relative ones under /root/workdir)'
        : 'raise files.outputs_timeout_s for larger outputs, and see `berth events ' + run.id + '`',
  };
}

/** The spec's `outputs`: a list of paths, or `{paths, cloud}`, with at least one path. */
export function specNamesOutputs(spec: { outputs?: unknown }): boolean {
  const o = spec.outputs;
  if (Array.isArray(o)) return o.length > 0;
  return (
    typeof o === 'object' && o !== null && Array.isArray((o as { paths?: unknown }).paths) && (o as { paths: unknown[] }).paths.length > 0
  );
}
