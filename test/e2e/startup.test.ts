// The daemon's start-up and exits as a process (issue #14 items 1, 8, 11, 14, 17, 19; issue #9):
// whatever the service does while the daemon starts, it stays up, serves `status`, and ends only
// when asked, with 0; what cannot work (a bad config, a home it must not use, a damaged store)
// ends it at once with exit 2 and one sentence.
import { chmodSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { berth, QUICK_DAEMON, startDaemonProcess, userEnv, type DaemonChild } from '../helpers/berth-cli.js';

const dirs: string[] = [];
const children: DaemonChild[] = [];
const servers: Server[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'berth-start-'));
  dirs.push(d);
  return d;
}
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** A fake marketplace: `handler` answers every request (or never does). */
async function fakeService(handler: (path: string, res: ServerResponse) => void): Promise<string> {
  const s = createServer((req, res) => handler(req.url ?? '/', res));
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

function daemon(home: string, apiUrl: string, config: unknown = QUICK_DAEMON, args: string[] = []): DaemonChild {
  const child = startDaemonProcess(home, userEnv(home, { BERTH_API_URL: apiUrl, BERTH_API_KEY: 'k' }), config, args);
  children.push(child);
  return child;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SPEC = { name: 'queued-job', image: 'ubuntu:22.04', max_price_per_hour: 1 };

// "At once" is not timed: a stop that waited for what the daemon is waiting on (a list held 60 s, a
// retry, the next poll) would outlast the test's own time limit (red with the poller's stop not
// aborting its loop: each of these tests timed out).
describe('a daemon whose service fails while it starts', () => {
  it('stays up with a warning and keeps retrying when the service is unreachable; status works; SIGTERM exits 0 at once', async () => {
    const home = join(tempDir(), 'home');
    const d = daemon(home, `http://127.0.0.1:${await closedPort()}`);
    await d.listening();
    await sleep(2500);
    expect(d.proc.exitCode, d.output()).toBeNull();
    const warnings = d
      .output()
      .split('\n')
      .filter((l) => l.includes('"level":40') && /list/.test(l));
    expect(warnings.length, d.output()).toBeGreaterThanOrEqual(2);
    const status = await berth(['status'], userEnv(home));
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('No runs yet');
    const exit = await d.signal('SIGTERM');
    expect(exit.code).toBe(0);
    expect(existsSync(join(home, 'daemon.json'))).toBe(false);
  });

  it('serves status and stores submits at once while the service holds its lists unanswered, and SIGTERM still exits 0', async () => {
    const home = join(tempDir(), 'home');
    const url = await fakeService(() => undefined); // never answers
    const d = daemon(home, url, { ...QUICK_DAEMON, service: { timeout_s: 60 }, retry: { ...QUICK_DAEMON.retry, max_retry_time_s: 60 } });
    await d.listening(5000);
    const status = await berth(['status', '--json'], userEnv(home));
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toEqual([]);
    const specFile = join(home, 'job.json');
    writeFileSync(specFile, JSON.stringify(SPEC));
    const submitted = await berth(['submit', specFile, '--json'], userEnv(home));
    expect(submitted.code, submitted.stderr).toBe(0);
    // Stored at once; no list blocks the start, so the run may already be searching.
    expect(JSON.parse(submitted.stdout)).toMatchObject({ name: 'queued-job', state: expect.stringMatching(/^(queued|searching)$/) });
    const exit = await d.signal('SIGTERM');
    expect(exit).toMatchObject({ code: 0, signal: null });
  });

  it('stays up and serves status when every list is deprecated or rate limited', async () => {
    const home = join(tempDir(), 'home');
    const url = await fakeService((path, res) => {
      if (path.startsWith('/api/v0/instances')) {
        res.writeHead(410, { 'content-type': 'application/json' }).end('{"success":false,"error":"deprecated_endpoint","msg":"use v1"}');
      } else {
        res.writeHead(429, { 'content-type': 'text/plain' }).end('API requests too frequent endpoint threshold=1.0');
      }
    });
    const d = daemon(home, url);
    await d.listening();
    await sleep(2000);
    expect(d.proc.exitCode, d.output()).toBeNull();
    expect((await berth(['status'], userEnv(home))).code).toBe(0);
    expect((await d.signal('SIGTERM')).code).toBe(0);
  });

  it('stops gracefully on SIGHUP: exit 0, daemon.json removed', async () => {
    const home = join(tempDir(), 'home');
    const d = daemon(home, `http://127.0.0.1:${await closedPort()}`);
    await d.listening();
    const exit = await d.signal('SIGHUP');
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(existsSync(join(home, 'daemon.json'))).toBe(false);
    expect(d.output()).toContain('berth daemon stopped');
  });
});

describe('a start that cannot work ends with exit 2 and one sentence', () => {
  /** The result of `berth daemon` that must refuse to start. */
  async function refused(home: string, config: unknown, extra: NodeJS.ProcessEnv = {}, shellPrefix?: string) {
    const dir = tempDir();
    const configFile = join(dir, 'config.json');
    writeFileSync(configFile, JSON.stringify(config));
    const r = await berth(
      ['daemon', '--config', configFile],
      userEnv(home, { BERTH_API_URL: `http://127.0.0.1:${await closedPort()}`, BERTH_API_KEY: 'k', ...extra }),
      15_000,
      shellPrefix,
    );
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
    expect(r.stderr).not.toMatch(/Unexpected error|bug in berth|\n\s+at /);
    return r;
  }

  it.each([
    ['a listen port past 65535', { daemon: { listen: '127.0.0.1:70000' } }, {}, /daemon\.listen: the port must be 0 to 65535/],
    [
      'a base_url that is not http(s)',
      {},
      { BERTH_API_URL: 'ftp://127.0.0.1/' },
      /service\.base_url: must be an http:\/\/ or https:\/\/ address/,
    ],
    // Issue #38 item 1: a relax ladder the job spec's parse refuses would go into every run's stored
    // spec and make it unreadable after a restart; it stops the daemon instead, naming the field.
    [
      'a relax ladder with a string number',
      { runs: { relax: [{ set: { reliability: { gte: '0.9' } } }] } },
      {},
      /runs\.relax\.0\.set\.reliability\.gte: expected a number/,
    ],
    ['a relax ladder with an empty drop', { runs: { relax: [{ drop: [] }] } }, {}, /runs\.relax\.0\.drop: must name at least one filter/],
    [
      'a relax ladder that drops the port filter',
      { runs: { relax: [{ drop: ['direct_port_count'] }] } },
      {},
      /runs\.relax\.0\.drop\.0: "direct_port_count" is never relaxed/,
    ],
    [
      'a relax ladder with an unknown operator',
      { runs: { relax: [{ set: { gpu_ram: { like: 16 } } }] } },
      {},
      /runs\.relax\.0\.set\.gpu_ram\.like: unknown operator "like"/,
    ],
  ])('%s: refused before anything else happens (BERTH_HOME not even created)', async (_, config, env, message) => {
    const home = join(tempDir(), 'home');
    const r = await refused(home, { ...QUICK_DAEMON, ...config }, env);
    expect(r.stderr).toMatch(message);
    expect(existsSync(home)).toBe(false);
  });

  it('a home under a read-only parent', async () => {
    let parent = '/sys'; // read-only even for root
    if (process.getuid?.() !== 0) {
      parent = join(tempDir(), 'ro');
      mkdirSync(parent);
      chmodSync(parent, 0o555);
    }
    const r = await refused(join(parent, 'berth-home'), QUICK_DAEMON);
    expect(r.stderr).toMatch(/^Cannot create BERTH_HOME .*berth-home \((EACCES|EPERM|EROFS)\)/);
  });

  it('a corrupt page in berth.db', async () => {
    const home = join(tempDir(), 'home');
    const store = openStore({ home, lock: true });
    store.transaction(() => store.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 }));
    store.close();
    const fd = openSync(join(home, 'berth.db'), 'r+');
    writeSync(fd, Buffer.alloc(4096, 0xa5), 0, 4096, 2 * 4096); // the third page: the runs table
    closeSync(fd);
    const r = await refused(home, QUICK_DAEMON);
    expect(r.stderr).toMatch(/berth\.db is damaged .*restore berth\.db from a backup/);
  });

  it('a disk that fills up at the first start', async () => {
    const home = join(tempDir(), 'home');
    // A file-size limit makes every write past 8 KiB fail as a full disk would.
    const r = await refused(home, QUICK_DAEMON, {}, 'ulimit -f 16');
    expect(r.stderr).toMatch(/Cannot write .*berth\.db .*disk may be full/);
  });

  it('a home other users can write', async () => {
    const home = join(tempDir(), 'home');
    mkdirSync(home);
    chmodSync(home, 0o777);
    const r = await refused(home, QUICK_DAEMON);
    expect(r.stderr).toMatch(/can be written by other users \(mode 0777\).*chmod 700/);
  });
});

describe('BERTH_HOME is private', () => {
  it('repairs a 0755 home and a 0644 berth.db to 0700/0600, and creates every file 0600', async () => {
    const home = join(tempDir(), 'home');
    const store = openStore({ home });
    // An ended run: its row (and the secret in it) is kept, but there is nothing to resume.
    store.transaction(() => {
      store.runs.insert({ id: 'r1', name: 'a', specJson: '{"env":{"A":"secret"}}', createdAt: 1 });
      store.runs.setState('r1', 'cancelled', null, 2);
    });
    store.close();
    chmodSync(home, 0o755);
    chmodSync(join(home, 'berth.db'), 0o644);
    const d = daemon(home, `http://127.0.0.1:${await closedPort()}`);
    await d.listening();
    await sleep(500);
    expect(statSync(home).mode & 0o777).toBe(0o700);
    for (const f of ['berth.db', 'berth.db-wal', 'berth.db-shm', 'control.token', 'daemon.json', 'daemon.lock', 'store.json']) {
      expect(statSync(join(home, f)).mode & 0o777, f).toBe(0o600);
    }
    expect((await d.signal('SIGTERM')).code).toBe(0);
  });
});
