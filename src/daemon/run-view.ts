// The run object shown by `berth status --json`, `berth submit --json` and `GET /v1/runs/{id}`.
// Built from rows, never from the spec: it holds no API key, no instance key and no env value.
import type { AttemptRow, RunRow, Store } from '../store/index.js';
import { logsOf, readyOf, sshOf, type ReadyView, type SshEndpointView } from './run-view-readiness.js';

export interface RunView {
  id: string;
  name: string;
  state: string;
  created_at: string;
  updated_at: string;
  attempt: number;
  relax_level: number;
  instance: {
    id: number;
    offer_id: number;
    machine_id: number | null;
    ssh_host: string | null;
    ssh_port: number | null;
    actual_status: string | null;
    dph_total: number | null;
    /** Where to connect: the SSH endpoints that answered (both when both did); empty until ready. */
    ssh: SshEndpointView[];
    /** How and when the instance was found ready; null until then. */
    ready: ReadyView | null;
  } | null;
  attempts: Array<{
    n: number;
    offer_id: number;
    machine_id: number | null;
    instance_id: number | null;
    outcome: string | null;
    started_at: string;
    ended_at: string | null;
    detail: string | null;
    /** A failed attempt's last container log lines (≤ 4 KB, secrets removed); null when none were fetched. */
    logs: string | null;
  }>;
  error: { kind: string; message: string } | null;
  /** True while the run is held after a restored backup: nothing is rented until `berth resume` (or a cancel). */
  held: boolean;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The attempt whose instance the run holds now: created, and not ended (or running). */
function heldAttempt(run: RunRow, attempts: AttemptRow[]): AttemptRow | undefined {
  if (run.ended_at !== null) return undefined;
  const last = attempts.at(-1);
  if (!last || last.instance_id === null) return undefined;
  return last.outcome === null || last.outcome === 'running' ? last : undefined;
}

export function toRunView(run: RunRow, attempts: AttemptRow[]): RunView {
  const held = heldAttempt(run, attempts);
  return {
    id: run.id,
    name: run.name,
    state: run.state,
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
      logs: logsOf(a),
    })),
    error: run.error_json ? (JSON.parse(run.error_json) as { kind: string; message: string }) : null,
    held: run.held_at !== null && run.ended_at === null,
  };
}

export function loadRunView(store: Store, runId: string): RunView | undefined {
  const row = store.runs.get(runId);
  return row ? toRunView(row, store.attempts.forRun(runId)) : undefined;
}
