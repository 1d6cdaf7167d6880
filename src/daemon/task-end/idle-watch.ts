// Idle autostop (issue #19): a run with `idle_timeout_s` whose running instance's `gpu_util` (a
// column of the v1 list berth already reads) stays below `idle_gpu_util_pct` for that long is ended
// `expired` with `error.kind: "idle"`, through the same EXPIRE as the money guard's limits, so its
// instance is destroyed first. No extra calls: it reads the lists the poller makes anyway.
//
// Per run: busy (or unknown) → idle since the first list that showed it idle → warned once
// `runs.idle_warning_s` before the timeout (an `idle.warning` event and notification) → expired at
// the first list at or after the timeout. A `gpu_util` the service does not report (absent, null,
// not a number, or negative: the service's -1 for "unknown", which the client already turns into
// null, src/client/normalize.ts) counts as unknown and ends an idle stretch, never starts one: berth never destroys
// an instance for want of a figure. A list showing the instance not running ends the stretch too.
//
// Its unit is read both ways: show_instance.yaml says "GPU utilization as a fraction" (0..1), the
// official CLI prints it as a percent (vast-cli `vast.py` instance_fields "Util. %", `_fmt_gpu`
// "{gpu_util:.0f}%"). Read as a percent, a busy GPU reporting 0.97 would be "below 5%" and be
// destroyed while it works; so a figure counts as idle only when it is idle in both readings:
// below idle_gpu_util_pct / 100 (0.05 for the default 5). An idle GPU reads 0 in both.
//
// Kept in memory: a restarted daemon measures a stretch afresh (the instance bills a little longer,
// never less than the user asked).
import type { Instance } from '../../client/types.js';
import type { RunError } from '../../errors.js';
import type { IdlePlan } from '../../job-spec/run-plan.js';

/** The figure below which a GPU is idle in both readings of gpu_util (a fraction, or a percent). */
function idleBelow(thresholdPct: number): number {
  return thresholdPct / 100;
}

interface Stretch {
  instanceId: number;
  since: number;
  warned: boolean;
}

export interface IdleWatchDeps {
  /** How long before the timeout the warning is given, ms. */
  warnBeforeMs: number;
  /** Writes the idle.warning event and notification of the run. */
  warn(runId: string, message: string, data: Record<string, number>): void;
  /** Ends the run `expired` with this reason (its instance is destroyed first). */
  expire(runId: string, reason: RunError): void;
}

export class IdleWatch {
  private readonly stretches = new Map<string, Stretch>();

  constructor(private readonly deps: IdleWatchDeps) {}

  /** What a list started at `listedAt` showed of the instance of a `running` run. */
  observe(runId: string, idle: IdlePlan | null, inst: Instance, listedAt: number): void {
    if (idle === null) return;
    const threshold = idle.gpuUtilPct;
    const util = inst.gpu_util;
    if (
      inst.actual_status !== 'running' ||
      typeof util !== 'number' ||
      !Number.isFinite(util) ||
      util < 0 ||
      util >= idleBelow(threshold)
    ) {
      this.stretches.delete(runId);
      return;
    }
    let s = this.stretches.get(runId);
    if (!s || s.instanceId !== inst.id) {
      s = { instanceId: inst.id, since: listedAt, warned: false };
      this.stretches.set(runId, s);
    }
    const timeoutMs = idle.timeoutS * 1000;
    const idleMs = listedAt - s.since;
    if (idleMs >= timeoutMs) {
      this.stretches.delete(runId);
      this.deps.expire(runId, {
        kind: 'idle',
        message: `The GPU of instance ${inst.id} stayed below ${threshold}% utilisation for ${idle.timeoutS} s (idle_timeout_s).`,
      });
      return;
    }
    if (!s.warned && idleMs >= timeoutMs - this.deps.warnBeforeMs) {
      s.warned = true;
      const leftS = Math.max(0, Math.round((timeoutMs - idleMs) / 1000));
      this.deps.warn(
        runId,
        `instance ${inst.id} has been idle (GPU below ${threshold}%) for ${Math.round(idleMs / 1000)} s: it will be destroyed in ${leftS} s unless its GPU gets busy`,
        { instanceId: inst.id, idleS: idleMs / 1000, leftS, gpuUtil: util },
      );
    }
  }

  /** The run ended or no longer holds an instance. */
  forget(runId: string): void {
    this.stretches.delete(runId);
  }
}
