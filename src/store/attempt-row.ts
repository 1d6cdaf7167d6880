// One row of the attempts table (src/store/attempts.ts): kept apart so that the spend computation
// (src/store/spend.ts), which attempts.ts uses, can read it without a circle of imports.
type CreateState = 'intent' | 'created' | 'offer_gone' | 'failed';

export interface AttemptRow {
  run_id: string;
  n: number;
  offer_id: number;
  machine_id: number | null;
  /** Billed $/h, disk included: the offer's until the instance is listed, then the list's dph_total. */
  dph_total: number | null;
  label: string;
  create_state: CreateState;
  create_detail: string | null;
  instance_id: number | null;
  actual_status: string | null;
  status_msg: string | null;
  ssh_host: string | null;
  ssh_port: number | null;
  outcome: string | null;
  detail: string | null;
  started_at: number;
  ended_at: number | null;
  /** When the create that made the instance was sent (it cannot have billed before); null without an instance. */
  instance_created_at: number | null;
  /** When a list first showed the instance running. */
  first_running_at: number | null;
  /** When a list taken after the destroy no longer showed the instance; null while it may still bill. */
  destroy_confirmed_at: number | null;
  /** $ accrued at earlier prices, before `dph_since`. */
  usd_before: number;
  /** Since when `dph_total` applies; null: since the instance was made. */
  dph_since: number | null;
  /** When the run took the instance as ready (the latest time, after a rebid restarted it). */
  ready_at: number | null;
  /** How it was found ready: 'ssh' (a banner), 'status' or 'callback'. */
  ready_via: string | null;
  /** JSON array of {kind, host, port}: the SSH endpoints to show (those that answered, when probed). */
  ssh_endpoints: string | null;
  /** The container's last log lines (≤ 4 KB, secrets removed), for a failed or ended attempt, or a task's followed over SSH. */
  log_tail: string | null;
  /** The GPU model the attempt's offer rents, as the search listed it; null for attempts journaled before berth kept it. */
  gpu_name: string | null;
  /** How many of them the offer rents; null when gpu_name is. */
  num_gpus: number | null;
  /** The byte after the last one of the task's out-file kept (read over SSH); null: never followed. */
  follow_offset: number | null;
  /** The instance's host key (`SHA256:...`) pinned at berth's first login; null: never logged in. */
  ssh_host_key: string | null;
  /** When its instance went to a warm hold (it bills to the hold from then); null: never. */
  handed_at: number | null;
  /** The warm hold whose instance this attempt took instead of a create; null: it created its own. */
  warm_hold_id: number | null;
  /** A taken instance's update + recycle: 'intent' (may have been sent), 'sent' (answered success); null: no recycle. */
  recycle_state: 'intent' | 'sent' | null;
  /** sha256 of the onstart that recycle sends. */
  recycle_sha: string | null;
}
