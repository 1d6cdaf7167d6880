// Every duration the daemon derives from its configuration by a rule (rather than reading one
// setting as it is), in one place, so that two parts that must agree (a run waiting for its
// destroyed instance to leave the list, the reconciler waiting for an orphan's) cannot drift.
import type { Config } from './schema.js';

/**
 * How long a destroyed instance may stay listed before its destroy is sent again, s: it should
 * leave the very next list, so several polls, and 30 s at least (a run's instance and an orphan alike).
 */
export function destroyConfirmS(config: Pick<Config, 'polling'>): number {
  return Math.max(5 * config.polling.interval_s, 30);
}

/**
 * How long a look-up through the shared instance lists may take, ms: a create whose outcome is
 * unknown is looked for by label this long, and the last look at a boot deadline waits this long.
 * Two lists' worth, since the next list may have just started without the instance.
 */
export function reconcileGraceMs(config: Pick<Config, 'polling'>): number {
  return Math.max(2 * config.polling.interval_s * 1000, 2000);
}

/** How often each running task's log is read for its end marker, ms: `runs.task_probe_interval_s`, or two poll intervals. */
export function taskProbeIntervalMs(config: Pick<Config, 'polling' | 'runs'>): number {
  return (config.runs.task_probe_interval_s ?? 2 * config.polling.interval_s) * 1000;
}

/** The shortest idle_timeout_s that can be measured, s: two poll intervals (gpu_util is read from the lists). */
export function minIdleTimeoutS(config: Pick<Config, 'polling'>): number {
  return 2 * config.polling.interval_s;
}
