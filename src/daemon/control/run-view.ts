// The run object (src/wire/control-api.ts `Run`) built from the store's rows, never from the spec:
// it holds no API key, no instance key and no env value.
import type { RunError } from '../../errors.js';
import type { AttemptRow, EventRow, OutputsRow, RunRow, Store } from '../../store/index.js';
import type { RunFilter } from '../../store/runs.js';
import type { WarmHoldRow } from '../../store/warm-holds.js';
import { warmHoldsBilling } from '../instances/holdings.js';
import type { Run, RunEvent } from '../../wire/control-api.js';
import { attemptIsLive } from '../../wire/run-states.js';
import { costView } from '../../store/spend.js';
import { specIsTask } from '../../job-spec/run-plan.js';
import { logsOf, readyOf, sshOf } from './run-view-readiness.js';
import { shownOutputFiles } from './output-names.js';
import { unreadableForView } from '../runs/unreadable-runs.js';
import { outputsMissing, specNamesOutputs } from '../runs/outputs-missing.js';

const iso = (ms: number) => new Date(ms).toISOString();

/** The attempt whose instance the run holds now: created, and not ended (or running). */
function heldAttempt(run: RunRow, attempts: AttemptRow[]): AttemptRow | undefined {
  if (run.ended_at !== null) return undefined;
  const last = attempts.at(-1);
  if (!last || last.instance_id === null) return undefined;
  return attemptIsLive(last) ? last : undefined;
}

type StoredSpecShape = { run?: unknown; outputs?: unknown; boot_timeout_s?: unknown; search?: { filters?: { gpu_name?: unknown } } };

/**
 * What a list of runs shows of a stored spec: the GPU models its gpu_name filter names (`eq` or
 * `in`) and whether it is a task. Only those fields are read, without the whole parse (a list may
 * hold thousands of runs): the rest (env values) never reaches the view.
 */
function specFacts(specJson: string): { gpu: string | null; task: boolean; bootTimeoutS: number | null; outputs: boolean } {
  let spec: StoredSpecShape;
  try {
    spec = JSON.parse(specJson) as StoredSpecShape;
  } catch {
    return { gpu: null, task: false, bootTimeoutS: null, outputs: false };
  }
  const bootTimeoutS = typeof spec.boot_timeout_s === 'number' ? spec.boot_timeout_s : null;
  return { gpu: gpuAskedFor(spec.search?.filters?.gpu_name), task: specIsTask(spec), bootTimeoutS, outputs: specNamesOutputs(spec) };
}

/** When the held instance is given up if not ready (the machine's boot deadline: its create + boot_timeout_s). */
function bootDeadlineOf(held: AttemptRow, bootTimeoutS: number | null): string | null {
  if (held.ready_at !== null || held.instance_created_at === null || bootTimeoutS === null) return null;
  return iso(held.instance_created_at + bootTimeoutS * 1000);
}

/**
 * While a failed task's instance is kept (`keeping`), when it is destroyed: the machine's bound
 * (`current.keepUntil` in the stored snapshot); null in any other state, or before it is known.
 */
function keepUntilOf(run: RunRow): string | null {
  if (run.state !== 'keeping' || run.snapshot_json === null) return null;
  try {
    const snap = JSON.parse(run.snapshot_json) as { context?: { current?: { keepUntil?: unknown } } };
    const until = snap.context?.current?.keepUntil;
    return typeof until === 'number' ? iso(until) : null;
  } catch {
    return null;
  }
}

function gpuAskedFor(filter: unknown): string | null {
  if (typeof filter !== 'object' || filter === null) return null;
  const { eq, in: list } = filter as { eq?: unknown; in?: unknown };
  const names = typeof eq === 'string' ? [eq] : Array.isArray(list) ? list.filter((n): n is string => typeof n === 'string') : [];
  return names.length > 0 ? names.join(' | ') : null;
}

/** An offer's GPUs as people write them: `RTX 4090`, or `2× RTX 4090` for more than one. */
function gpuText(name: string, count: number | null): string {
  return count !== null && count > 1 ? `${count}× ${name}` : name;
}

/**
 * The GPUs the run rents: those of the latest attempt whose create was sent (being made, or made)
 * and whose offer's GPU is recorded. Attempts whose offer was gone or whose create failed rented nothing.
 */
function gpuRented(attempts: AttemptRow[]): string | null {
  const a = attempts.findLast((x) => x.gpu_name !== null && (x.create_state === 'intent' || x.create_state === 'created'));
  return a ? gpuText(a.gpu_name!, a.num_gpus) : null;
}

/** A live run this berth cannot read (../runs/unreadable-runs.ts): what it needs; null for any other run. */
function unreadableView(run: RunRow): Run['unreadable'] {
  const why = run.ended_at === null ? unreadableForView(run) : undefined;
  return why ? { reason: why.reason, needs_spec_version: why.specVersion, needs_machine_version: why.machineVersion } : null;
}

/** A task's outputs as the store keeps them, per attempt; the names scrubbed of the run's secrets (./output-names.ts). */
function outputsView(specJson: string, rows: OutputsRow[]): Run['outputs'] {
  return rows.map((o) => ({
    attempt: o.attempt,
    state: o.state,
    host: o.host,
    files: shownOutputFiles(specJson, o.files),
    bytes: o.bytes,
    detail: o.detail,
    started_at: iso(o.started_at),
    ended_at: o.ended_at === null ? null : iso(o.ended_at),
  }));
}

/** The warm holds that bill now, by the run that handed each over (its newest). */
function warmByRun(store: Store, now: number): Map<string, WarmHoldRow> {
  const m = new Map<string, WarmHoldRow>();
  for (const h of warmHoldsBilling(store, now)) if ((m.get(h.run_id)?.id ?? -1) < h.id) m.set(h.run_id, h);
  return m;
}

function warmView(h: WarmHoldRow | undefined): Run['warm'] {
  if (!h || h.state === 'taken') return null;
  return { instance_id: h.instance_id, state: h.state, until: iso(h.ended_at ?? h.idle_until), usd_per_hour: h.dph_total };
}

export function toRunView(run: RunRow, attempts: AttemptRow[], now: number, outputs: OutputsRow[] = [], warm?: WarmHoldRow): Run {
  const held = heldAttempt(run, attempts);
  const rented = gpuRented(attempts);
  const spec = specFacts(run.spec_json);
  return {
    id: run.id,
    name: run.name,
    state: run.state,
    gpu: rented ?? spec.gpu,
    gpu_rented: rented !== null,
    task: spec.task,
    created_at: iso(run.created_at),
    updated_at: iso(run.updated_at),
    attempt: run.attempt,
    relax_level: run.relax_level,
    instance: held
      ? {
          id: held.instance_id!,
          offer_id: held.offer_id,
          machine_id: held.machine_id,
          ssh_host: held.ssh_host,
          ssh_port: held.ssh_port,
          actual_status: held.actual_status,
          dph_total: held.dph_total,
          ssh: sshOf(held),
          ready: readyOf(held),
          boot_deadline: bootDeadlineOf(held, spec.bootTimeoutS),
          keep_until: keepUntilOf(run),
        }
      : null,
    attempts: attempts.map((a) => ({
      n: a.n,
      offer_id: a.offer_id,
      machine_id: a.machine_id,
      instance_id: a.instance_id,
      outcome: a.outcome,
      started_at: iso(a.started_at),
      ended_at: a.ended_at === null ? null : iso(a.ended_at),
      detail: a.detail,
      dph_total: a.dph_total,
      gpu_name: a.gpu_name,
      num_gpus: a.num_gpus,
      logs: logsOf(a),
    })),
    error: run.error_json ? (JSON.parse(run.error_json) as RunError) : null,
    held: run.held_at !== null && run.ended_at === null,
    unreadable: unreadableView(run),
    cost: costView(attempts, run.ended_at, now),
    outputs: outputsView(run.spec_json, outputs),
    outputs_missing: outputsMissing(
      { id: run.id, state: run.state, ended: run.ended_at !== null, outputs: spec.task && spec.outputs },
      attempts,
      outputs,
    ),
    warm: warmView(warm),
  };
}

export function loadRunView(store: Store, runId: string, now: number): Run | undefined {
  const row = store.runs.get(runId);
  return row ? toRunView(row, store.attempts.forRun(runId), now, store.outputs.forRun(runId), warmByRun(store, now).get(runId)) : undefined;
}

/** A page of runs, newest first, in three queries (runs, then all their attempts and outputs), whatever its size. */
export function loadRunViews(store: Store, page: { limit: number; after?: RunRow; filter?: RunFilter }, now: number): Run[] {
  const rows = page.filter ? store.runs.listFiltered(page.filter, page.limit, page.after) : store.runs.list(page.limit, page.after);
  const byRun = new Map<string, AttemptRow[]>(rows.map((r) => [r.id, []]));
  for (const a of store.attempts.forRuns(rows.map((r) => r.id))) byRun.get(a.run_id)?.push(a);
  const outputs = new Map<string, OutputsRow[]>(rows.map((r) => [r.id, []]));
  for (const o of store.outputs.forRuns(rows.map((r) => r.id))) outputs.get(o.run_id)?.push(o);
  const warm = warmByRun(store, now);
  return rows.map((r) => toRunView(r, byRun.get(r.id)!, now, outputs.get(r.id), warm.get(r.id)));
}

/** One event-log row as the control API shows it. */
export function toRunEvent(e: EventRow): RunEvent {
  return {
    id: e.id,
    at: iso(e.at),
    type: e.type,
    message: e.message,
    data: e.data_json ? JSON.parse(e.data_json) : null,
    count: e.count,
    first_at: e.first_at === null ? null : iso(e.first_at),
  };
}
