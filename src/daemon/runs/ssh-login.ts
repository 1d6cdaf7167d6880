// Readiness by SSH, its second half (issue #39 item 2): once an endpoint answered with a banner
// (./ssh-probe.ts), berth logs in with its key (the direct address first, the proxy otherwise; the
// key attached to the instance first where the account's may not have reached it; the host key
// pinned with the attempt at the first login: ../task-end/task-shells.ts) and runs `true`. Exit 0:
// the instance is ready. An sshd may answer before the container's keys are in place: the
// service's own SSH banner says "If authentication fails, try again after a few seconds"
// (guides/instances/connect/ssh.mdx, vast-ai/docs; attach_ssh.yaml says nothing of when an attached
// key takes effect). So a refused key, an endpoint that does not answer or a dropped session is
// tried again, paced, until the SSH deadline. What no retry mends
// ends the wait at once: a key berth cannot use, an API key that may not attach it, a host key
// other than the one pinned (refused, never logged in to). Either way the instance is ready by its
// banner, as before logins: this never fails a run nor destroys a working instance; it says why.
import type { LoginInput, LoginOutput } from '../../../machines/run-types.js';
import type { Clock } from '../../clock.js';
import type { AttemptLogins } from '../task-end/task-shells.js';

/** The command whose exit 0 proves a login can run things: a shell builtin, in any image. */
const READY_COMMAND = 'true';
const FIRST_PAUSE_MS = 1_000;
const MAX_PAUSE_MS = 10_000;

/** Failures no retry mends: the wait ends at once, ready by the banner. */
const FINAL = new Set(['ssh_key', 'ssh_host_key_changed', 'permission']);

const WORDS: Record<string, string> = {
  ssh_auth_refused: "the instance refused berth's key",
  ssh_host_key_changed: 'the host key of the instance changed since berth first logged in: berth refuses it',
  ssh_key: "berth's SSH key cannot be used",
  permission: "the API key may not attach berth's key to the instance",
  ssh_unreachable: 'no SSH endpoint let berth log in',
  ssh_dropped: 'the SSH session dropped',
};

function codeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'ssh_dropped';
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Logs in and runs the command until it works, a final failure, or `input.until`; never rejects but for the caller's abort. */
export async function loginWhenReady(
  deps: { clock: Clock; login?: AttemptLogins | undefined },
  input: LoginInput,
  signal: AbortSignal,
): Promise<LoginOutput> {
  const { clock } = deps;
  if (!deps.login) return { ok: false, code: 'ssh_key', why: 'berth has no SSH key to log in with' };
  const target = { runId: input.runId, n: input.n, instanceId: input.instanceId };
  // Aborted at the deadline too: a login in flight then stops.
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  const deadline = new AbortController();
  void clock.sleepUntil(input.until, deadline.signal).then(
    () => stop.abort(),
    () => undefined,
  );
  let last: LoginOutput = { ok: false, code: 'ssh_unreachable', why: WORDS['ssh_unreachable']! };
  let pause = FIRST_PAUSE_MS;
  try {
    while (!stop.signal.aborted) {
      try {
        const login = await deps.login(target, stop.signal, input.endpoints);
        try {
          const { code } = await login.exec(READY_COMMAND, { signal: stop.signal });
          if (code === 0) return { ok: true };
          // The login works but runs nothing (a forced command, a broken shell): no retry mends that.
          return { ok: false, code: 'ssh_command', why: `berth logged in, but \`${READY_COMMAND}\` exited ${code ?? 'by a signal'}` };
        } finally {
          login.close();
        }
      } catch (err) {
        if (signal.aborted) throw err;
        if (stop.signal.aborted) break;
        const code = codeOf(err);
        last = { ok: false, code, why: WORDS[code] ?? messageOf(err) };
        if (FINAL.has(code)) return last;
      }
      await clock.sleep(pause, stop.signal).catch(() => undefined);
      pause = Math.min(MAX_PAUSE_MS, Math.round(pause * 1.5));
    }
    if (signal.aborted) throw signal.reason;
    return { ...last, why: `${last.why} (no login by the SSH deadline)` };
  } finally {
    deadline.abort();
    signal.removeEventListener('abort', onAbort);
  }
}
