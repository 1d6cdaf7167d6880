// The control API and the CLI against a hostile local user or web page (issue #14 items 7, 9, 13,
// 15, 16, 18, 20, 22): real daemon processes, the real CLI, raw sockets where a client library
// would refuse to send what an attacker sends.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { FAST_CONFIG, FAST_SIM, jobSpec } from '../helpers/world.js';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'berth-hostile-'));
  dirs.push(d);
  return d;
}

let sim: RunningSimulator;
let daemon: DaemonProcess;
let home: string;
const daemons: DaemonProcess[] = [];

beforeAll(async () => {
  sim = await startSimulator({ seed: 31, config: FAST_SIM });
  home = tempDir();
  daemon = await spawnDaemon({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
  daemons.push(daemon);
});
afterAll(async () => {
  for (const d of daemons) if (d.proc.exitCode === null && d.proc.signalCode === null) await d.kill9();
  await sim?.close();
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
});

/** A request as node:http sends it, with whatever headers the test names (Host included). */
function raw(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const bearer = () => ({ authorization: `Bearer ${readFileSync(join(home, 'control.token'), 'utf8').trim()}` });
const runCount = async () => (await daemon.api<RunView[]>('GET', '/v1/runs')).body.length;

describe('the control token (items 7 and 9)', () => {
  it('replaces an empty or blank control.token at start and never accepts an empty token', async () => {
    const h = tempDir();
    writeFileSync(join(h, 'control.token'), ' \n', { mode: 0o600 });
    const d = await spawnDaemon({ home: h, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
    daemons.push(d);
    expect(d.token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    for (const authorization of ['Bearer ', 'Bearer', '', 'Bearer  \n'.trim()]) {
      const r = await raw(d.url, 'GET', '/v1/runs', authorization ? { authorization } : {});
      expect(r.status, authorization).toBe(401);
    }
    expect(await d.stop()).toBe(0);
  });

  it("refuses a body that is not application/json (a web page's no-preflight POST) and stores nothing", async () => {
    const before = await runCount();
    const r = await raw(daemon.url, 'POST', '/v1/runs', { ...bearer(), 'content-type': 'text/plain' }, JSON.stringify(jobSpec()));
    expect(r.status).toBe(415);
    expect(await runCount()).toBe(before);
  });

  it('refuses a Host that is not its own address (DNS rebinding) and any foreign Origin', async () => {
    const port = new URL(daemon.url).port;
    expect((await raw(daemon.url, 'GET', '/v1/runs', { ...bearer(), host: `evil.example:${port}` })).status).toBe(403);
    expect((await raw(daemon.url, 'GET', '/healthz', { host: 'evil.example' })).status).toBe(403);
    expect((await raw(daemon.url, 'GET', '/v1/runs', { ...bearer(), origin: 'http://evil.example' })).status).toBe(403);
    expect((await raw(daemon.url, 'GET', '/v1/runs', { ...bearer(), host: `localhost:${port}` })).status).toBe(200);
  });

  it('the CLI never sends the token to a program squatting the address in a stale daemon.json', async () => {
    const h = tempDir();
    const seen: IncomingHttpHeaders[] = [];
    const squatter = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json' }).end(req.url?.startsWith('/v1/proof') ? '{"proof":"00"}' : '[]');
    });
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(squatter.address() as AddressInfo).port}`;
      writeFileSync(join(h, 'daemon.json'), JSON.stringify({ url, pid: 999999 }), { mode: 0o600 });
      writeFileSync(join(h, 'control.token'), 'A'.repeat(32), { mode: 0o600 });
      const r = await berth(['status'], userEnv(h));
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(/could not prove it holds the control token\), so the token was not sent/);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((hdr) => hdr.authorization === undefined)).toBe(true);
      expect(JSON.stringify(seen)).not.toContain('A'.repeat(32));
    } finally {
      squatter.close();
    }
  });

  it('berth token rotate switches the running daemon to a new token at once', async () => {
    const old = bearer();
    const r = await berth(['token', 'rotate'], userEnv(home));
    expect(r.code, r.stderr).toBe(0);
    const fresh = bearer();
    expect(fresh.authorization).not.toBe(old.authorization);
    expect((await raw(daemon.url, 'GET', '/v1/runs', old)).status).toBe(401);
    expect((await raw(daemon.url, 'GET', '/v1/runs', fresh)).status).toBe(200);
    expect((await berth(['status'], userEnv(home))).code).toBe(0);
    daemon.token = fresh.authorization.slice(7);
  });
});

describe('hostile requests and inputs', () => {
  it('answers an unparseable request target with 400 and logs no error line (item 18)', async () => {
    const { port } = new URL(daemon.url);
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () =>
        socket.end(`GET // HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`),
      );
      let text = '';
      socket.on('data', (c) => (text += c.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400/);
    await new Promise((r) => setTimeout(r, 200));
    const errorLines = readFileSync(join(home, 'daemon.log'), 'utf8')
      .split('\n')
      .filter((l) => l.includes('"level":50'));
    expect(errorLines).toEqual([]);
  });

  it('answers the same Idempotency-Key with a different spec with 409 naming the run that holds it (item 15)', async () => {
    const dir = tempDir();
    const a = join(dir, 'a.json');
    const b = join(dir, 'b.json');
    writeFileSync(a, JSON.stringify(jobSpec({ name: 'first' })));
    writeFileSync(b, JSON.stringify(jobSpec({ name: 'second' })));
    const first = await berth(['submit', a, '--idempotency-key', 'key-15'], userEnv(home));
    expect(first.code, first.stderr).toBe(0);
    const runId = first.stdout.trim();
    const again = await berth(['submit', a, '--idempotency-key', 'key-15'], userEnv(home));
    expect(again.stdout.trim()).toBe(runId);
    const before = await runCount();
    const conflict = await raw(
      daemon.url,
      'POST',
      '/v1/runs',
      { ...bearer(), 'content-type': 'application/json', 'idempotency-key': 'key-15' },
      readFileSync(b, 'utf8'),
    );
    expect(conflict.status).toBe(409);
    expect(JSON.parse(conflict.body)).toMatchObject({ error: { kind: 'idempotency_conflict', run_id: runId } });
    const cli = await berth(['submit', b, '--idempotency-key', 'key-15'], userEnv(home));
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain(runId);
    expect(await runCount()).toBe(before);
    await daemon.api('POST', `/v1/runs/${runId}/cancel`);
  });

  it('berth events prints every event, past the 10,000 of one page (item 20)', async () => {
    const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ name: 'many-events' }));
    const runId = created.body.id;
    await daemon.api('POST', `/v1/runs/${runId}/cancel`);
    await daemon.waitFor(runId, (r) => r.state === 'cancelled');
    const db = new Database(join(home, 'berth.db'));
    const insert = db.prepare(`INSERT INTO events (run_id, at, type, message) VALUES (?, ?, 'note', ?)`);
    db.transaction(() => {
      for (let i = 0; i < 10_050; i++) insert.run(runId, Date.now(), `note ${i}`);
    })();
    const total = (db.prepare(`SELECT count(*) AS n FROM events WHERE run_id = ?`).get(runId) as { n: number }).n;
    db.close();
    const r = await berth(['events', runId, '--json'], userEnv(home), 60_000);
    expect(r.code, r.stderr).toBe(0);
    const events = JSON.parse(r.stdout) as Array<{ id: number }>;
    expect(events).toHaveLength(total);
    expect(total).toBeGreaterThan(10_050);
    const text = await berth(['events', runId], userEnv(home), 60_000);
    expect(text.stdout.trim().split('\n')).toHaveLength(total);
  });

  it('never prints terminal escapes or control characters raw (item 22)', async () => {
    const dir = tempDir();
    const image = 'evil\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202eimage:latest';
    const file = join(dir, 'escape.json');
    writeFileSync(file, JSON.stringify(jobSpec({ name: 'escapes', image })));
    const submitted = await berth(['submit', file], userEnv(home));
    expect(submitted.code, submitted.stderr).toBe(0);
    const runId = submitted.stdout.trim();
    await daemon.api('POST', `/v1/runs/${runId}/cancel`);
    for (const args of [['events', runId], ['events', runId, '--json'], ['status', runId], ['status', runId, '--json'], ['status']]) {
      const r = await berth(args, userEnv(home));
      expect(r.code, args.join(' ')).toBe(0);
      // eslint-disable-next-line no-control-regex -- no control character may reach the terminal
      expect(r.stdout + r.stderr, args.join(' ')).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
    }
    const shown = await berth(['events', runId], userEnv(home));
    expect(shown.stdout).toContain('evil\\u001b]0;pwned\\u0007');
    const json = JSON.parse((await berth(['events', runId, '--json'], userEnv(home))).stdout) as Array<{ message: string }>;
    expect(json.some((e) => e.message.includes(image))).toBe(true); // JSON output stays JSON, and exact
  });
});

describe('spec files (items 13 and 16)', () => {
  it('refuses /dev/zero and a FIFO at once instead of hanging', async () => {
    const dir = tempDir();
    const fifo = join(dir, 'fifo.json');
    execFileSync('mkfifo', [fifo]);
    for (const args of [
      ['submit', '/dev/zero'],
      ['validate', '/dev/zero'],
      ['submit', fifo],
      ['validate', fifo],
      ['validate', dir],
    ]) {
      const r = await berth(args, userEnv(home), 10_000);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/is not a regular file/);
    }
  });

  it('validate and submit agree on the size limit: a 1 MiB onstart fails both, 900 KiB passes both', async () => {
    const dir = tempDir();
    const big = join(dir, 'big.json');
    writeFileSync(big, JSON.stringify(jobSpec({ name: 'big', onstart: 'echo hi\n'.repeat(131_072) })));
    const validated = await berth(['validate', big], userEnv(home));
    const submitted = await berth(['submit', big], userEnv(home));
    for (const r of [validated, submitted]) {
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/a job spec is at most 1024 KiB/);
    }
    const fits = join(dir, 'fits.json');
    writeFileSync(fits, JSON.stringify(jobSpec({ name: 'fits', onstart: 'echo hi\n'.repeat(115_200) })));
    expect((await berth(['validate', fits], userEnv(home))).code).toBe(0);
    const ok = await berth(['submit', fits], userEnv(home));
    expect(ok.code, ok.stderr).toBe(0);
    await daemon.api('POST', `/v1/runs/${ok.stdout.trim()}/cancel`);
  });
});
