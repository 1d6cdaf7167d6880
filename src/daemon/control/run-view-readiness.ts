// The run object's fields about readiness and failures (issue #12), built from an attempt's row:
// where SSH answers (`instance.ssh`), how and when the instance was found ready (`instance.ready`),
// and a failed attempt's last container log lines (`attempts[].logs`). Kept apart from the run
// object's core so that each field is one function.
import type { AttemptRow } from '../../store/index.js';
import type { RunInstance } from '../../wire/control-api.js';

type SshEndpointView = RunInstance['ssh'][number];
type ReadyView = NonNullable<RunInstance['ready']>;

/**
 * The endpoints to connect to: those that answered with a banner when the run was ready by SSH
 * (both when both did), else those the list showed. Empty until the attempt is ready.
 */
export function sshOf(a: AttemptRow): SshEndpointView[] {
  if (!a.ssh_endpoints) return [];
  try {
    const parsed = JSON.parse(a.ssh_endpoints) as unknown;
    return Array.isArray(parsed) ? parsed.filter(isEndpoint).map(({ kind, host, port }) => ({ kind, host, port })) : [];
  } catch {
    return [];
  }
}

function isEndpoint(e: unknown): e is SshEndpointView {
  const o = e as Partial<SshEndpointView> | null;
  return (o?.kind === 'proxy' || o?.kind === 'direct') && typeof o.host === 'string' && typeof o.port === 'number';
}

export function readyOf(a: AttemptRow): ReadyView | null {
  if (a.ready_at === null || (a.ready_via !== 'ssh' && a.ready_via !== 'status' && a.ready_via !== 'callback')) return null;
  const after = a.first_running_at === null ? null : Math.max(0, Math.round((a.ready_at - a.first_running_at) / 100) / 10);
  return { via: a.ready_via, at: new Date(a.ready_at).toISOString(), after_running_s: after };
}

/** A failed attempt's last container log lines (≤ 4 KB, secrets removed), or null. */
export function logsOf(a: AttemptRow): string | null {
  return a.log_tail;
}
