// What an instance's logs say, built from its status history at the moment they are requested:
// the container log (image pull, each start with its sshd line and the output of the onstart run
// that start began, sshd's lines for each SSH connection made to it, the OCI error, the exit code,
// stops and restarts) or, with `daemon_logs`, the host daemon's lines (every status change).
// Lines are made for past moments only: a line due later (sshd of an `ssh_late` instance) is left
// out until its time has come. A host that is offline or silent writes nothing new.
// Before its container exists (and after a destroy: routes/logs.ts) the log is docker's error
// alone, `Error response from daemon: No such container: C.<id>`, as observed on the service
// (service-facts.md, "Added 2026-11-27"). A recycle removes the container: from its `recycling` on,
// the log is the new container's alone (and docker's error until that one exists).
import { createHash } from 'node:crypto';
import { splitImage } from './image-name.js';
import type { SimConfig } from './config.js';
import type { LiveInstance } from './instances.js';
import { STATUS_MSG } from './lifecycle.js';

export interface Line {
  at: number;
  text: string;
}

/** What the host uploads for a container that does not exist (yet, or any more). */
export const noSuchContainer = (id: number): string => `Error response from daemon: No such container: C.${id}`;
/** Statuses in which the instance has a container (created, even if it never started). */
const HAS_CONTAINER = new Set(['running', 'created', 'exited', 'rebooting']);

/** sshd's start line, or its failure for the profiles whose SSH never answers. */
const SSHD_UP = 'Server listening on 0.0.0.0 port 22.';
const SSHD_DOWN = 'sshd: no hostkeys available -- exiting.';
const SSH_DOWN_PROFILES = new Set(['ssh_refused', 'ssh_no_banner', 'ssh_hang']);

/**
 * The container's log lines. `onstartOutputs` holds each onstart run's output lines (the last bytes,
 * as onstart-runner.ts keeps them, each at the moment it began) by the index in `hist.statuses` of
 * the `running` status whose start began it: each run's lines follow its own "Container ... started"
 * line, and sshd's lines fall among them by their moments, so that a live log only grows at its end.
 */
export function containerLog(
  inst: LiveInstance,
  onstartOutputs: ReadonlyMap<number, readonly Line[]>,
  nowSim: number,
  ssh: SimConfig['ssh_listeners'],
  /** sshd's lines for the SSH connections made to it (ssh-listeners.ts), each at its moment. */
  sshdLines: readonly Line[] = [],
): string[] {
  const { hist, params } = inst;
  // The container of now began at the latest recycle seen by now (or at creation).
  let from = 0;
  hist.statuses.forEach((s, i) => {
    if (s.status === 'recycling' && s.at.sim_s <= nowSim) from = i + 1;
  });
  const since = from === 0 ? -Infinity : hist.statuses[from - 1]!.at.sim_s;
  const ours = hist.statuses.slice(from);
  if (!ours.some((s) => s.at.sim_s <= nowSim && s.status !== null && HAS_CONTAINER.has(s.status))) {
    return [noSuchContainer(hist.id)];
  }
  const name = `C.${hist.id}`;
  const { repo, tag } = splitImage(params.image);
  const lines: Line[] = [];
  let pulled = false;
  for (const [j, s] of ours.entries()) {
    const i = from + j;
    const at = s.at.sim_s;
    const add = (text: string, when = at) => lines.push({ at: when, text });
    switch (s.status) {
      case 'loading':
        if (!pulled) add(`${tag}: Pulling from ${repo}`);
        break;
      case 'running':
        if (!pulled) {
          add(`Digest: sha256:${createHash('sha256').update(params.image).digest('hex')}`);
          add(`Status: Downloaded newer image for ${repo}:${tag}`);
          pulled = true;
        }
        add(`Container ${name} started`);
        if (SSH_DOWN_PROFILES.has(hist.profile)) add(SSHD_DOWN);
        else add(SSHD_UP, hist.profile === 'ssh_late' ? at + ssh.late_s : at);
        for (const line of onstartOutputs.get(i) ?? []) add(line.text, Math.max(at, line.at));
        break;
      case 'created':
        add(`docker: ${s.msg}.`);
        break;
      case 'exited':
        add(`Container ${name} exited with code ${exitCode(s.msg)}`);
        break;
      case 'stopped':
        // A bid created below the minimum never had a container to stop.
        if (s.msg !== STATUS_MSG.bidTooLow)
          add(s.msg === STATUS_MSG.outbid ? `Container ${name} stopped: outbid` : `Container ${name} stopped`);
        break;
      case 'rebooting':
        add(`Container ${name} restarting`);
        break;
      default:
        // null (no container yet), unknown and offline (the host is silent): nothing to log.
        break;
    }
  }
  lines.push(...sshdLines.filter((l) => l.at >= since));
  return lines
    .filter((l) => l.at <= nowSim)
    .sort((a, b) => a.at - b.at)
    .map((l) => l.text);
}

/** The host daemon's view: one line per status change, with its wall time. */
export function daemonLog(inst: LiveInstance): string[] {
  return inst.hist.statuses.map((s) => {
    const when = new Date(s.at.wall_ms).toISOString();
    return `${when} instance ${inst.hist.id}: ${s.status ?? 'provisioning'}${s.msg ? ` (${s.msg})` : ''}`;
  });
}

function exitCode(msg: string): number {
  const m = /exited with code (\d+)/.exec(msg);
  return m ? Number(m[1]) : 1;
}
