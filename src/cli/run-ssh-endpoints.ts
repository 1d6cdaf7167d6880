// Where a run's instance answers SSH, as the daemon's run view says (`instance.ssh`: the direct
// address first, the proxy otherwise): what `berth ssh` logs in to and `berth ssh-config` names.
import { BerthError } from '../errors.js';
import type { SshEndpoint } from '../ssh/session.js';
import type { Run } from '../wire/control-api.js';

/** The run view's endpoints (direct first); before they are known, the proxy the instance record names. */
export function sshEndpointsOf(run: Run): SshEndpoint[] {
  const i = run.instance;
  if (!i) return [];
  const listed: SshEndpoint[] = i.ssh.map((e) => ({ kind: e.kind, host: e.host, port: e.port }));
  if (listed.length === 0 && i.ssh_host && i.ssh_port) listed.push({ kind: 'proxy', host: i.ssh_host, port: i.ssh_port });
  return [...listed.filter((e) => e.kind === 'direct'), ...listed.filter((e) => e.kind !== 'direct')];
}

/** A run with no instance to log in to, said with why. */
export function noSshInstance(run: Run): BerthError {
  const why = run.instance
    ? `its instance ${run.instance.id} shows no SSH address yet (${run.instance.actual_status ?? 'not listed yet'})`
    : `it holds no instance now (state ${run.state})`;
  return new BerthError('ssh_unreachable', `Run ${run.id} cannot be logged in to: ${why}.`);
}
