// A run's plan: its job spec with every default filled in (the spec's own, then the daemon's
// `runs` configuration), and what follows from it decided once: whether it is a task, how it bids,
// when it counts as idle. Made once at submission (`planRun`); stored as the spec's JSON with a
// version (`storedSpecText`), and read back through the same parse after a restart
// (`readStoredPlan`), each older version migrated step by step, as the machine's snapshots are.
// Nothing else in the daemon fills a default or asks whether a run is a task.
import type { Config } from '../config/schema.js';
import { SpecError } from '../errors.js';
import { JOB_SPEC_DEFAULTS, WORKDIR_DEST_DEFAULT, type JobSpec, type ResolvedJobSpec } from './schema.js';
import { resolvedOutputPath } from './output-names.js';
import { parseJobSpec, parseJsonText } from './validate.js';

/** The version of the stored spec that this build writes. */
export const STORED_SPEC_VERSION = 4;
/** The key of the version in the stored JSON; not a spec field, removed before the parse. */
const VERSION_KEY = 'berth_spec_version';

/** A task: the command the run exists for, and how often it may start again after a failure. */
export interface TaskPlan {
  run: string;
  maxRestarts: number;
  /** Seconds a task that failed for good keeps its instance for `berth ssh` (keep_on_failure_s; 0: none). */
  keepOnFailureS: number;
  /** Seconds its instance waits warm for the next run of its reuse key once it ended cleanly (warm.idle_s; 0: none, issue #51). */
  warmIdleS: number;
  /** The container directory the task starts in: the spec's workdir_dest, else /root/workdir (made empty without a workdir). */
  dir: string;
  /** The sha256 of the packed workdir uploaded into `dir` before the task starts, or null without one. */
  workdirSha256: string | null;
}

/** An interruptible run's bid: the spec's price (or the offer's min_bid), its step and what an outbid does. */
interface BidPlan {
  price: number | 'min';
  stepPct: number;
  onOutbid: 'rebid' | 'failover' | 'on_demand';
}

/** Idle autostop: how long, and below what GPU utilisation. */
export interface IdlePlan {
  timeoutS: number;
  gpuUtilPct: number;
}

/** What a task leaves to take when it ends (issue #40): absolute container paths, and where they go. */
export interface OutputsPlan {
  /** Absolute container paths, in the spec's order (relative ones resolved against OUTPUTS_BASE). */
  paths: string[];
  /** Copied by the service to one of the account's cloud connections instead of downloaded; null: downloaded. */
  cloud: { connection: string | number; path: string } | null;
}

/** The spec's `outputs`, resolved: relative paths against the directory the task starts in. */
function outputsOf(outputs: JobSpec['outputs']): OutputsPlan | null {
  if (outputs === undefined) return null;
  const list = Array.isArray(outputs) ? outputs : outputs.paths;
  const paths = list.map(resolvedOutputPath);
  return { paths, cloud: Array.isArray(outputs) ? null : (outputs.cloud ?? null) };
}

/** The spec as it runs (every field the spec may default is filled), with what follows from it. */
export type RunPlan = ResolvedJobSpec & {
  /** When the run counts as running: "status" for every task (see `planOf`), else the spec's, "ssh" by default. */
  readonly ready_when: 'ssh' | 'status';
  /** The task, or null for a run that only holds an instance until cancelled. */
  readonly task: TaskPlan | null;
  /** null for an on-demand run. */
  readonly bid: BidPlan | null;
  /** null without idle_timeout_s. */
  readonly idle: IdlePlan | null;
  /** null without outputs. */
  readonly collect: OutputsPlan | null;
};

/** The spec with what it left out of its limits and relax ladder filled from `config.runs`. */
function withRunDefaults(spec: JobSpec, runs: Config['runs']): ResolvedJobSpec {
  return {
    ...spec,
    relax: spec.relax ?? runs.relax,
    max_attempts: spec.max_attempts ?? runs.max_attempts,
    boot_timeout_s: spec.boot_timeout_s ?? runs.boot_timeout_s,
    deadline_s: spec.deadline_s ?? runs.deadline_s,
    // Absent after filling means no runtime limit.
    ...(spec.max_runtime_s !== undefined || runs.max_runtime_s == null ? {} : { max_runtime_s: runs.max_runtime_s }),
  };
}

/**
 * What follows from a spec whose limits are filled: the one place the defaults that depend on
 * other fields are decided (readiness, the bid step and outbid policy of a bid search, a task's
 * restarts, the idle threshold of an idle timeout). Each is also written into its field, so the
 * stored spec says what runs; only where the spec's own rules allow the field, since the stored
 * spec is parsed by them.
 *
 * A task is ready when the service lists its instance running (`actual_status: running`): it needs
 * no way in, its end is read from its log, so SSH that never answers from the daemon's network (a
 * NAT, a firewall, a host's broken proxy) must not destroy a task that works (issue #37). The spec's
 * rules refuse `ready_when: "ssh"` on a task.
 */
function planOf(spec: ResolvedJobSpec): RunPlan {
  const task = specIsTask(spec)
    ? {
        run: spec.run!,
        maxRestarts: spec.max_restarts ?? 0,
        keepOnFailureS: spec.keep_on_failure_s ?? 0,
        warmIdleS: spec.warm?.idle_s ?? 0,
        dir: spec.workdir_dest ?? WORKDIR_DEST_DEFAULT,
        workdirSha256: spec.workdir_sha256 ?? null,
      }
    : null;
  const readyWhen = task ? 'status' : (spec.ready_when ?? JOB_SPEC_DEFAULTS.ready_when);
  const bid =
    spec.search.type === 'bid' && spec.bid_price !== undefined
      ? {
          price: spec.bid_price,
          stepPct: spec.bid_step_pct ?? JOB_SPEC_DEFAULTS.bid_step_pct,
          onOutbid: spec.on_outbid ?? JOB_SPEC_DEFAULTS.on_outbid,
        }
      : null;
  const idle =
    spec.idle_timeout_s === undefined
      ? null
      : { timeoutS: spec.idle_timeout_s, gpuUtilPct: spec.idle_gpu_util_pct ?? JOB_SPEC_DEFAULTS.idle_gpu_util_pct };
  return {
    ...spec,
    ready_when: readyWhen,
    ...(task ? { max_restarts: task.maxRestarts } : {}),
    ...(spec.workdir !== undefined ? { workdir_dest: spec.workdir_dest ?? WORKDIR_DEST_DEFAULT } : {}),
    ...(bid ? { bid_step_pct: bid.stepPct, on_outbid: bid.onOutbid } : {}),
    ...(idle ? { idle_gpu_util_pct: idle.gpuUtilPct } : {}),
    task,
    bid,
    idle,
    collect: outputsOf(spec.outputs),
  };
}

/** The plan of a spec just submitted: the limits and relax ladder it left out come from `config.runs`. */
export function planRun(spec: JobSpec, runs: Config['runs']): RunPlan {
  return planOf(withRunDefaults(spec, runs));
}

/** The JSON stored with the run: the filled spec and its version (env and secrets values included: the create needs them). */
export function storedSpecText(plan: RunPlan): string {
  const { task: _task, bid: _bid, idle: _idle, collect: _collect, ...spec } = plan;
  return JSON.stringify({ ...spec, [VERSION_KEY]: STORED_SPEC_VERSION });
}

/**
 * A stored spec that this build cannot read: its run cannot be driven here. `newerVersion`: the
 * spec's version when a later berth stored it (a daemon of that version reads it), else null (a
 * parse stricter than the one that stored it refuses it).
 */
export class StoredSpecError extends Error {
  constructor(
    message: string,
    readonly newerVersion: number | null = null,
  ) {
    super(message);
    this.name = 'StoredSpecError';
  }
}

type Step = (spec: Record<string, unknown>) => Record<string, unknown>;

/** Migrations of a stored spec, keyed by the version they upgrade from. */
const STEPS: Record<number, Step> = {
  // Version 1 (no version key): the resolved spec as submitted, its dependent defaults not written
  // into it, and before ready_when existed without that field. Nothing to change: planOf fills
  // ready_when ("ssh" for a run, as such a run waited; a task goes on to the next step) and the
  // dependent defaults, exactly as version 1 was read.
  1: (spec) => spec,
  // Version 2: a task waited for SSH like any run (ready_when "ssh" by default). From version 3 a
  // task is ready once the service lists it running, and the spec's rules refuse "ssh" on a task:
  // a task stored waiting for SSH reads as ready by status (a run already running is unchanged).
  2: (spec) => (specIsTask(spec) ? { ...spec, ready_when: 'status' } : spec),
  // Version 3: before `secrets` (issue #41), every env value was scrubbed from logs as a secret.
  // Moved into `secrets`, they still are, and are set in the instance the same way.
  3: ({ env, ...spec }) => (env === undefined ? spec : { ...spec, secrets: env }),
};

/**
 * The plan of a stored run, from its stored JSON: migrated to this version, then parsed by the job
 * spec's own schema. Throws StoredSpecError (saying what is wrong, never a value) when it cannot be read.
 */
export function readStoredPlan(text: string): RunPlan {
  let stored: unknown;
  try {
    stored = parseJsonText(text);
  } catch {
    throw new StoredSpecError('its stored spec is not valid JSON');
  }
  if (typeof stored !== 'object' || stored === null || Array.isArray(stored)) throw new StoredSpecError('its stored spec is not an object');
  const { [VERSION_KEY]: version = 1, ...fields } = stored as Record<string, unknown>;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1 || version > STORED_SPEC_VERSION) {
    throw new StoredSpecError(
      `its stored spec has version ${JSON.stringify(version)}; this build of berth reads versions 1 to ${STORED_SPEC_VERSION}`,
      typeof version === 'number' && Number.isInteger(version) && version > STORED_SPEC_VERSION ? version : null,
    );
  }
  let spec = fields;
  for (let v = version; v < STORED_SPEC_VERSION; v++) spec = STEPS[v]!(spec);
  let parsed: JobSpec;
  try {
    parsed = parseJobSpec(spec);
  } catch (err) {
    if (!(err instanceof SpecError)) throw err;
    throw new StoredSpecError(
      `its stored spec no longer passes validation: ${err.issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
    );
  }
  return planOf(resolvedFromStored(parsed));
}

/**
 * A parsed stored spec is already resolved: the limits and the relax ladder were filled at
 * submission (a spec that left them out never reaches the store), so they are read as they are.
 */
function resolvedFromStored(spec: JobSpec): ResolvedJobSpec {
  if (spec.relax === undefined || spec.max_attempts === undefined || spec.boot_timeout_s === undefined || spec.deadline_s === undefined) {
    throw new StoredSpecError('its stored spec lacks the limits filled at submission (relax, max_attempts, boot_timeout_s, deadline_s)');
  }
  return { ...spec, relax: spec.relax, max_attempts: spec.max_attempts, boot_timeout_s: spec.boot_timeout_s, deadline_s: spec.deadline_s };
}

/** Whether a spec is a task's; the run view reads it from the stored JSON without parsing the rest. */
export function specIsTask(spec: { run?: unknown }): boolean {
  return spec.run !== undefined;
}
