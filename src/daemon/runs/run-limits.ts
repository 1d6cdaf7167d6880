// The limits a run's machine works to (machines/run-types.ts RunLimits), from the run's plan and
// this daemon's configuration. Taken afresh whenever a run's actor starts or resumes: limits are
// not state (deadlines are absolute timestamps in the machine's context and do not move).
import type { RunLimits } from '../../../machines/run-machine.js';
import { destroyConfirmS } from '../../config/durations.js';
import type { Config } from '../../config/schema.js';
import type { RunPlan } from '../../job-spec/run-plan.js';

export function runLimits(spec: RunPlan, config: Config): RunLimits {
  return {
    maxAttempts: spec.max_attempts,
    bootTimeoutS: spec.boot_timeout_s,
    deadlineS: spec.deadline_s,
    relaxSteps: spec.relax.length,
    outageBackoffS: config.runs.outage_backoff_s,
    destroyRetryMaxDelayS: config.runs.destroy_retry_max_delay_s,
    destroyConfirmS: destroyConfirmS(config),
    missingPollsToLose: 3,
    goneOffersPerSearch: config.runs.gone_offers_per_search,
    // The SSH wait is also cut short by the run's own boot timeout (the machine waits for the earlier of the two).
    readyWhen: spec.ready_when,
    sshTimeoutS: config.readiness.ssh_timeout_s,
    maxPricePerHour: spec.max_price_per_hour,
    bid: spec.bid && { ...spec.bid, rebidWaitS: config.runs.rebid_wait_s },
    task: spec.task !== null,
    maxRestarts: spec.task?.maxRestarts ?? 0,
    keepOnFailureS: spec.task?.keepOnFailureS ?? 0,
    outputs: spec.collect !== null,
    outputsTimeoutS: config.files.outputs_timeout_s,
    stoppedKeepS: config.files.stopped_keep_s,
  };
}
