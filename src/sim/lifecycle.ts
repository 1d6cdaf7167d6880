// An instance's life as a plan: timed steps from the start of a phase (creation, or a start after a
// stop). The plan is fixed when the phase begins, from the instance's fault profile and its drawn
// timings, so the status at any sim moment is a pure function and history times are exact however
// late they are observed.
//
//   healthy             null → loading → running (ssh_* profiles too: only their SSH differs)
//   exited/unknown/offline  null → loading → that status (never running)
//   stuck_loading       null → loading (forever)
//   oci_failed          null → created with "OCI runtime create failed" (forever)
//   (any profile) whose image matches lifecycle.missing_images: null → loading → created with
//                       docker's pull error (forever)
//   lost_after_running  null → loading → running → offline | unknown | exited
import type { FaultProfile } from './config.js';

/**
 * `null` is the service's provisioning status; `stopped` follows a stop, an outbid, or a create
 * that could not start; `rebooting` follows a reboot, `recycling` a recycle (recycle_instance.yaml:
 * "Updates container status to 'recycling'").
 */
export type ActualStatus =
  | null
  | 'created'
  | 'loading'
  | 'running'
  | 'rebooting'
  | 'recycling'
  | 'stopped'
  | 'exited'
  | 'unknown'
  | 'offline'
  // Shown only on a boot detour (faults.boot_detour): anything the service may say, known or not.
  | DetourStatus;

/** A status word of `faults.boot_detour` (never `running`); `string & {}` keeps the known ones named. */
type DetourStatus = string & {};

export interface Step {
  /** Sim seconds after the phase start. */
  at: number;
  status: ActualStatus;
  msg: string;
}

export interface InstanceTimings {
  provision_s: number;
  boot_s: number;
  fail_after_s: number;
  lost_after_s: number;
  /** Where a lost_after_running instance ends up. */
  lost_to: 'offline' | 'unknown' | 'exited';
  /** Docker's answer when its image cannot be pulled (`lifecycle.missing_images`); null: it pulls. */
  pull_error: string | null;
}

export const STATUS_MSG = {
  provisioning: '',
  loading: 'Pulling image layers',
  running: 'success, running',
  oci: 'Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown',
  exited: 'Error: container exited with code 1',
  unknown: 'No heartbeat from host',
  offline: 'Host machine is offline',
  stopped: 'Instance stopped',
  serviceStop: 'Instance stopped: the account balance reached zero',
  rebooting: 'Rebooting: docker stop, then docker start',
  recycling: 'Recycling: docker stop and remove, then the container is made again from its image',
  outbid: 'Outbid: the bid is below the current minimum bid; the instance resumes when its bid wins again',
  bidTooLow: 'Waiting: the bid is below the current minimum bid; the instance starts when its bid wins',
  // Docker's words when a container's published port is taken (a create that lost its offer, SkyPilot #9117).
  portTaken:
    'Error response from daemon: driver failed programming external connectivity on endpoint C.0: Bind for 0.0.0.0:22 failed: port is already allocated',
  unavailable: "Created stopped: the machine's GPUs are not available now (cancel_unavail was false)",
} as const;

/** Docker's answer to a pull of a tag its registry does not have (Docker Hub's words). */
export function missingImageMessage(repo: string, tag: string): string {
  return `Error response from daemon: manifest for ${repo}:${tag} not found: manifest unknown: manifest unknown`;
}

const failure = (status: 'exited' | 'unknown' | 'offline'): string => STATUS_MSG[status];

/** The plan of a new instance (`restart` false) or of a start after a stop (`restart` true). */
export function planFor(profile: FaultProfile, t: InstanceTimings, restart: boolean, restartLoadS: number): Step[] {
  const steps: Step[] = [];
  let at = 0;
  if (!restart && t.provision_s > 0) {
    steps.push({ at: 0, status: null, msg: STATUS_MSG.provisioning });
    at = t.provision_s;
  }
  if (profile === 'oci_failed') {
    steps.push({ at, status: 'created', msg: STATUS_MSG.oci });
    return steps;
  }
  steps.push({ at, status: 'loading', msg: STATUS_MSG.loading });
  if (t.pull_error !== null) {
    // The pull fails on every host alike and the container is never made: `created` with docker's
    // error, for good (the official client's self-test sees `actual_status: "created"` with "manifest
    // for ... not found", vast-cli tests/cli/test_machines_commands.py).
    steps.push({ at: at + Math.min(t.fail_after_s, 10), status: 'created', msg: t.pull_error });
    return steps;
  }
  switch (profile) {
    case 'stuck_loading':
      return steps;
    case 'exited':
    case 'unknown':
    case 'offline':
      steps.push({ at: at + t.fail_after_s, status: profile, msg: failure(profile) });
      return steps;
    case 'healthy':
    case 'ssh_refused':
    case 'ssh_no_banner':
    case 'ssh_hang':
    case 'ssh_late':
    case 'no_gpu_util':
    case 'ssh_keys_late':
    case 'lost_after_running': {
      const runAt = at + (restart ? restartLoadS : t.boot_s);
      steps.push({ at: runAt, status: 'running', msg: STATUS_MSG.running });
      if (profile === 'lost_after_running') {
        steps.push({ at: runAt + t.lost_after_s, status: t.lost_to, msg: failure(t.lost_to) });
      }
      return steps;
    }
  }
}

/**
 * The plan with a detour before it loads (`faults.boot_detour`): each status for its `s` from the end
 * of provisioning (`from`), everything after pushed back by the detour's length. A detour's status
 * carries no message: what the service writes then is not known.
 */
export function withDetour(plan: Step[], detour: ReadonlyArray<{ status: string | null; s: number }>, from: number): Step[] {
  if (detour.length === 0) return plan;
  const total = detour.reduce((sum, d) => sum + d.s, 0);
  const before = plan.filter((st) => st.at < from);
  const after = plan.filter((st) => st.at >= from).map((st) => ({ ...st, at: st.at + total }));
  const steps: Step[] = [];
  let at = from;
  for (const d of detour) {
    steps.push({ at, status: d.status, msg: '' });
    at += d.s;
  }
  return [...before, ...steps, ...after];
}

/**
 * The plan of a create that lost its offer to another create on it (faults.double_buy_rate): it
 * never fully starts. `port_error`: loading, then `created` with docker's port-bind error;
 * `silent`: loading for ever.
 */
export function doubleBoughtPlan(t: InstanceTimings, sign: 'port_error' | 'silent'): Step[] {
  const steps: Step[] = [];
  let at = 0;
  if (t.provision_s > 0) {
    steps.push({ at: 0, status: null, msg: STATUS_MSG.provisioning });
    at = t.provision_s;
  }
  steps.push({ at, status: 'loading', msg: STATUS_MSG.loading });
  if (sign === 'port_error') steps.push({ at: at + Math.min(t.fail_after_s, 10), status: 'created', msg: STATUS_MSG.portTaken });
  return steps;
}

/** The plan of a reboot: `rebooting` for `rebootS`, then the plan of a start. */
export function rebootPlan(profile: FaultProfile, t: InstanceTimings, rebootS: number, restartLoadS: number): Step[] {
  const after = planFor(profile, t, true, restartLoadS).map((s) => ({ ...s, at: s.at + rebootS }));
  return [{ at: 0, status: 'rebooting', msg: STATUS_MSG.rebooting }, ...after];
}

/**
 * The plan of a recycle: `recycling` for `recycleS`, then a fresh container's load for `loadS` (the
 * image pulled again, fast where the machine has it) and the rest of its profile's life.
 */
export function recyclePlan(profile: FaultProfile, t: InstanceTimings, recycleS: number, loadS: number): Step[] {
  const after = planFor(profile, t, true, loadS).map((s) => ({ ...s, at: s.at + recycleS }));
  return [{ at: 0, status: 'recycling', msg: STATUS_MSG.recycling }, ...after];
}

/**
 * Statuses in which compute is billed: the host holds the GPUs from image pull on, and a reboot
 * keeps them (reboot_instance.yaml: "without losing GPU priority"). A recycle keeps them too
 * (recycle_instance.yaml, same words); the docs say nothing of its billing, so it bills as a reboot.
 */
export function billsCompute(status: ActualStatus): boolean {
  return status === 'loading' || status === 'running' || status === 'rebooting' || status === 'recycling';
}
