// src/ssh/session.ts against a real SSH server (ssh2's Server, test/helpers/ssh-test-server.ts).
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BerthError } from '../../../src/errors.js';
import { loadLoginKey, type BerthKey } from '../../../src/ssh/key-pair.js';
import { openSshSession, type SshEndpoint, type SshSession } from '../../../src/ssh/session.js';
import { startSshTestServer, type SshTestServer } from '../../helpers/ssh-test-server.js';

let home: string;
let key: BerthKey;
let other: BerthKey;
let server: SshTestServer;
const open: SshSession[] = [];
const extra: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'ssh-session-'));
  key = loadLoginKey({ home });
  other = loadLoginKey({ home: join(home, 'stranger') });
  server = await startSshTestServer({ authorizedKeys: [key.publicLine] });
});
afterEach(async () => {
  for (const s of open.splice(0)) s.close();
  for (const x of extra.splice(0)) await x.close();
});
afterAll(async () => {
  await server.close();
  rmSync(home, { recursive: true, force: true });
});

const direct = (port: number): SshEndpoint => ({ kind: 'direct', host: '127.0.0.1', port });
const proxy = (port: number): SshEndpoint => ({ kind: 'proxy', host: '127.0.0.1', port });

async function login(endpoints: SshEndpoint[], opts: { key?: BerthKey; pin?: string } = {}): Promise<SshSession> {
  const s = await openSshSession({
    endpoints,
    key: opts.key ?? key,
    verifyHostKey: (fp) => opts.pin === undefined || fp === opts.pin,
    connectTimeoutMs: 2_000,
  });
  open.push(s);
  return s;
}

async function failure(p: Promise<unknown>): Promise<BerthError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof BerthError) return err;
    throw err;
  }
  throw new Error('did not fail');
}

/** A port that accepts and closes at once (a proxy whose instance's sshd is not up yet). */
async function hangUpPort(): Promise<number> {
  const s: Server = createServer((sock) => sock.destroy());
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  extra.push({ close: () => new Promise<void>((r) => s.close(() => r())) });
  return (s.address() as AddressInfo).port;
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('an SSH login to an instance', () => {
  it('runs a command as root and returns its output and exit code', async () => {
    const s = await login([direct(server.port)]);
    const r = await s.exec('echo hi; echo oops >&2; whoami >/dev/null; exit 3');
    expect(r).toEqual({ code: 3, signal: null, stdout: 'hi\n', stderr: 'oops\n', truncated: false });
  });

  it('gives a command end-of-file for its input, so that one reading it does not wait', async () => {
    const s = await login([direct(server.port)]);
    expect((await s.exec('cat; echo done')).stdout).toBe('done\n');
  });

  it('returns the host key to pin at the first login, and logs in again while it matches', async () => {
    const first = await login([direct(server.port)]);
    expect(first.hostKey).toBe(server.hostKey);
    const again = await login([direct(server.port)], { pin: first.hostKey });
    expect((await again.exec('echo ok')).stdout).toBe('ok\n');
  });

  it('refuses a host whose key is not the pinned one, as ssh_host_key_changed', async () => {
    const e = await failure(login([direct(server.port)], { pin: 'SHA256:somethingelse' }));
    expect(e.code).toBe('ssh_host_key_changed');
    expect(e.message).toContain(server.hostKey);
  });

  it('reports a key the server refuses as ssh_auth_refused, without trying the proxy', async () => {
    const before = server.refused;
    const e = await failure(login([direct(server.port), proxy(server.port)], { key: other }));
    expect(e.code).toBe('ssh_auth_refused');
    expect(server.refused - before).toBe(1);
  });

  it('logs in by the direct address first, whatever the order given', async () => {
    const s = await login([proxy(server.port), direct(server.port)]);
    expect(s.endpoint.kind).toBe('direct');
  });

  it('logs in by the proxy when the direct address does not answer', async () => {
    const s = await login([proxy(server.port), direct(await closedPort())]);
    expect(s.endpoint).toEqual(proxy(server.port));
  });

  it('reports endpoints that refuse or hang up as ssh_unreachable (retryable)', async () => {
    const e = await failure(login([direct(await closedPort()), proxy(await hangUpPort())]));
    expect(e.code).toBe('ssh_unreachable');
    expect(e.retryable).toBe(true);
    expect(e.message).toContain('proxy');
  });

  it('keeps the first bytes of a large output, says it was cut, and still streams every chunk', async () => {
    const s = await login([direct(server.port)]);
    let streamed = 0;
    const r = await s.exec('head -c 100000 /dev/zero', { maxOutputBytes: 1000, onStdout: (c) => (streamed += c.length) });
    expect(r.stdout.length).toBe(1000);
    expect(r.truncated).toBe(true);
    expect(streamed).toBe(100000);
    expect(r.code).toBe(0);
  });

  it('kills a command when its signal aborts', async () => {
    const s = await login([direct(server.port)]);
    const ac = new AbortController();
    const run = s.exec('echo started; sleep 30', { signal: ac.signal, onStdout: () => ac.abort() });
    expect((await failure(run)).code).toBe('aborted');
    // The session stays usable.
    expect((await s.exec('echo still')).stdout).toBe('still\n');
  });

  it('says ssh_dropped when the server ends the session, to `closed` and to a command in flight', async () => {
    const s = await login([direct(server.port)]);
    const run = s.exec('echo started; sleep 30', { onStdout: () => server.dropAll() });
    expect((await failure(run)).code).toBe('ssh_dropped');
    expect((await s.closed)?.code).toBe('ssh_dropped');
    expect((await failure(s.exec('echo late'))).code).toBe('ssh_dropped');
  });

  it('resolves `closed` with null when berth closes it', async () => {
    const s = await login([direct(server.port)]);
    s.close();
    expect(await s.closed).toBeNull();
  });

  it('reports a channel the server refuses (this one serves no SFTP) as a typed error, the session staying usable', async () => {
    const s = await login([direct(server.port)]);
    await expect(s.sftp()).rejects.toMatchObject({ code: 'ssh_dropped' });
    expect((await s.exec('echo still')).stdout).toBe('still\n');
  });
});
