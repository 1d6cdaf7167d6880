// Logins to an attempt's instance, the follower's (./task-follow.ts TaskShells) and readiness by
// SSH's (../runs/ssh-login.ts, at the endpoints that answered its banner), the outputs' and the
// workdir upload's (../task-files/), through the ssh room (src/ssh/session.ts):
// berth's key, the attempt's endpoints as the store keeps them (those the list showed when the
// attempt became ready, else the proxy it lists), and the instance's host key pinned with the
// attempt at the first login (`attempts.ssh_host_key`): a later login to another key is refused
// (`ssh_host_key_changed`), also after a restart. Commands keep none of their output in memory:
// the follower takes each chunk as it comes.
import type { Endpoint } from '../../../machines/run-types.js';
import type { Store } from '../../store/index.js';
import type { BerthKey } from '../../ssh/key-pair.js';
import { openSshSession, type SshEndpoint, type SshSession } from '../../ssh/session.js';
import type { SFTPWrapper } from 'ssh2';
import { BerthError } from '../../errors.js';
import type { FollowTarget, TaskShell, TaskShells } from './task-follow.js';

/** A login that also reads the container's files (a task's outputs, ../task-files/outputs-download.ts). */
export interface FileShell extends TaskShell {
  sftp(): Promise<SFTPWrapper>;
}
export interface FileShells extends TaskShells {
  open(target: FollowTarget, signal: AbortSignal): Promise<FileShell>;
}

export interface SshTaskShellsDeps {
  store: Pick<Store, 'attempts' | 'transaction'>;
  /** berth's login key, read now; throws `ssh_key` when it cannot be used. */
  loginKey(): BerthKey;
  /** Before a login: berth's key put on the instance when the account's may not have reached it. */
  prepare?(t: FollowTarget, createdAt: number | null, signal: AbortSignal): Promise<unknown>;
}

/** One login to an attempt's instance: a command run, its exit code; its files over SFTP. */
export interface AttemptLogin {
  exec(
    command: string,
    options: { signal: AbortSignal; onStdout?: (chunk: Buffer) => void; stdin?: NodeJS.ReadableStream },
  ): Promise<{ code: number | null }>;
  sftp(): Promise<SFTPWrapper>;
  close(): void;
}

/** Logs in to an attempt's instance (at `endpoints`, else those the store keeps); rejects with an error whose `code` says why. */
export type AttemptLogins = (t: FollowTarget, signal: AbortSignal, endpoints?: readonly SshEndpoint[]) => Promise<AttemptLogin>;

/**
 * One session on an attempt's instance (at `endpoints`, else those the store keeps): berth's key,
 * attached first where needed, the host key pinned with the attempt. The workdir upload
 * (../task-files/) takes the session whole; the follower, readiness and the outputs take a login.
 */
export async function openAttemptSession(
  deps: SshTaskShellsDeps,
  t: FollowTarget,
  signal: AbortSignal,
  given?: readonly SshEndpoint[],
): Promise<SshSession> {
  const { store } = deps;
  const a = store.attempts.get(t.runId, t.n);
  const endpoints = given ?? (a ? endpointsOf(a) : []);
  if (!a || a.instance_id !== t.instanceId || endpoints.length === 0)
    throw new BerthError('ssh_unreachable', `Instance ${t.instanceId} shows no SSH endpoint yet.`, { retryable: true });
  const key = deps.loginKey();
  await deps.prepare?.(t, a.instance_created_at, signal);
  const pin = a.ssh_host_key;
  const session = await openSshSession({ endpoints, key, verifyHostKey: (fp) => pin === null || fp === pin, signal });
  if (pin === null) store.transaction(() => store.attempts.pinHostKey(t.runId, t.n, session.hostKey));
  return session;
}

/** The logins of the follower, readiness and the outputs alike (see openAttemptSession). */
export function sshAttemptLogins(deps: SshTaskShellsDeps): AttemptLogins {
  return async (t, signal, given) => {
    const session = await openAttemptSession(deps, t, signal, given);
    return {
      exec: (command, options) => session.exec(command, { ...options, maxOutputBytes: 0 }),
      sftp: () => session.sftp(),
      close: () => session.close(),
    };
  };
}

export function sshTaskShells(deps: SshTaskShellsDeps | AttemptLogins): FileShells {
  const login = typeof deps === 'function' ? deps : sshAttemptLogins(deps);
  return { open: (t, signal) => login(t, signal) };
}

/** The endpoints kept with the attempt, else the proxy its last list showed. */
function endpointsOf(a: { ssh_endpoints: string | null; ssh_host: string | null; ssh_port: number | null }): SshEndpoint[] {
  if (a.ssh_endpoints) {
    try {
      const kept = JSON.parse(a.ssh_endpoints) as Endpoint[];
      if (Array.isArray(kept) && kept.length > 0) return kept.map(({ kind, host, port }) => ({ kind, host, port }));
    } catch {
      // Not JSON: the proxy below.
    }
  }
  return a.ssh_host && a.ssh_port ? [{ kind: 'proxy', host: a.ssh_host, port: a.ssh_port }] : [];
}
