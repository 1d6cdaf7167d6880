// Readiness by SSH's login (src/daemon/runs/ssh-login.ts): a command run over berth's login once
// the banner answered, tried again while sshd refuses (its keys not in place yet) until the SSH
// deadline, the banner alone with the reason otherwise. Fake clock, stub logins.
import { describe, expect, it } from 'vitest';
import type { LoginInput } from '../../../../machines/run-types.js';
import { BerthError } from '../../../../src/errors.js';
import { loginWhenReady } from '../../../../src/daemon/runs/ssh-login.js';
import type { AttemptLogin, AttemptLogins } from '../../../../src/daemon/task-end/task-shells.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const ENDPOINTS = [
  { kind: 'proxy' as const, host: 'ssh1.example', port: 40022 },
  { kind: 'direct' as const, host: '203.0.113.7', port: 41022 },
];

function input(clock: FakeClock, inMs = 30_000): LoginInput {
  return { runId: 'r1', n: 1, instanceId: 100, endpoints: ENDPOINTS, until: clock.now() + inMs };
}

/** Logins that fail with each of `failures` in turn, then log in and answer `exit`. */
function logins(failures: Array<Error | 'hang'>, exit: number | null = 0) {
  const calls: Array<{ endpoints: unknown; command?: string; closed: boolean }> = [];
  const login: AttemptLogins = async (_t, signal, endpoints) => {
    const call: { endpoints: unknown; command?: string; closed: boolean } = { endpoints, closed: false };
    calls.push(call);
    const failure = failures.shift();
    if (failure === 'hang')
      await new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new BerthError('aborted', 'stopped'))));
    if (failure) throw failure;
    const session: AttemptLogin = {
      exec: async (command) => {
        call.command = command;
        return { code: exit };
      },
      sftp: () => Promise.reject(new Error('readiness never uses SFTP')),
      close: () => (call.closed = true),
    };
    return session;
  };
  return { login, calls };
}

const refused = () => new BerthError('ssh_auth_refused', "The instance's sshd refused berth's SSH key (user root).");

describe('readiness by a login that ran a command', () => {
  it('logs in to the endpoints that answered, runs a command, and is ready when it exits 0 (the session closed)', async () => {
    const clock = new FakeClock();
    const { login, calls } = logins([]);
    const out = await loginWhenReady({ clock, login }, input(clock), new AbortController().signal);
    expect(out).toEqual({ ok: true });
    expect(calls).toEqual([{ endpoints: ENDPOINTS, command: 'true', closed: true }]);
  });

  it('an sshd that refuses the key until its keys are in place: tried again, paced, and ready once a login works', async () => {
    const clock = new FakeClock();
    const { login, calls } = logins([refused(), refused(), refused()]);
    const done = loginWhenReady({ clock, login }, input(clock), new AbortController().signal);
    await clock.advance(1_000);
    expect(calls).toHaveLength(2);
    await clock.advance(1_500);
    expect(calls).toHaveLength(3);
    await clock.advance(2_250);
    expect(await done).toEqual({ ok: true });
    expect(calls).toHaveLength(4);
  });

  it('a key refused until the SSH deadline: the banner alone, saying the key was refused (never an error)', async () => {
    const clock = new FakeClock();
    const { login } = logins(Array.from({ length: 100 }, refused));
    const done = loginWhenReady({ clock, login }, input(clock, 30_000), new AbortController().signal);
    await clock.advance(30_000);
    const out = await done;
    expect(out).toEqual({
      ok: false,
      code: 'ssh_auth_refused',
      why: "the instance refused berth's key (no login by the SSH deadline)",
    });
  });

  it('a login that hangs past the deadline is stopped there, and the banner alone is the answer', async () => {
    const clock = new FakeClock();
    const { login, calls } = logins(['hang']);
    const done = loginWhenReady({ clock, login }, input(clock, 5_000), new AbortController().signal);
    await clock.advance(5_000);
    expect(await done).toMatchObject({ ok: false, code: 'ssh_unreachable' });
    expect(calls).toHaveLength(1);
  });

  it.each([
    ['ssh_host_key_changed', 'the host key of the instance changed since berth first logged in: berth refuses it'],
    ['ssh_key', "berth's SSH key cannot be used"],
    ['permission', "the API key may not attach berth's key to the instance"],
  ])('%s: no retry mends it, so the banner alone at once, saying why', async (code, why) => {
    const clock = new FakeClock();
    const { login, calls } = logins([new BerthError(code as 'ssh_key', 'x')]);
    const out = await loginWhenReady({ clock, login }, input(clock), new AbortController().signal);
    expect(out).toEqual({ ok: false, code, why });
    expect(calls).toHaveLength(1);
  });

  it('no key at all (no logins): the banner alone, saying so', async () => {
    const clock = new FakeClock();
    expect(await loginWhenReady({ clock }, input(clock), new AbortController().signal)).toMatchObject({ ok: false, code: 'ssh_key' });
  });

  it('a command that does not exit 0: the banner alone, saying what it exited with', async () => {
    const clock = new FakeClock();
    const { login } = logins([], 1);
    const out = await loginWhenReady({ clock, login }, input(clock), new AbortController().signal);
    expect(out).toMatchObject({ ok: false, code: 'ssh_command', why: expect.stringContaining('exited 1') });
  });

  it('rejects when the caller aborts (the run left booting), rather than answering for it', async () => {
    const clock = new FakeClock();
    const { login } = logins(Array.from({ length: 100 }, refused));
    const stop = new AbortController();
    const done = loginWhenReady({ clock, login }, input(clock), stop.signal);
    await clock.advance(1_000);
    stop.abort();
    await expect(done).rejects.toBeDefined();
  });
});
