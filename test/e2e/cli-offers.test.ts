// What a user sees before submitting (issue #41): `berth offers` lists what a run of the spec would
// rent now, relax steps included, through the running daemon; `validate` names a GPU the service
// does not know with the nearest one it does, and still passes, with a warning, when the service
// cannot be reached. The built CLI spawned as a process, against a spawned daemon and the simulator.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packagePath } from '../../src/package-path.js';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import type { OffersReport } from '../../src/wire/control-api.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { FAST_CONFIG, FAST_SIM } from '../helpers/world.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-offers-'));
let sim: RunningSimulator;
let daemon: DaemonProcess;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, config: FAST_SIM });
  const home = join(dir, 'home');
  mkdirSync(home);
  daemon = await spawnDaemon({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
  // The CLI finds the service where the daemon does: BERTH_API_URL.
  env = userEnv(home, { BERTH_API_URL: sim.url });
});

afterAll(async () => {
  if (daemon?.proc.exitCode === null) await daemon.kill9();
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

function write(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** A local port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const example = packagePath('examples', 'job.yaml');

describe('berth offers', () => {
  it('lists the offers of examples/job.yaml from the simulator with their billed $/h, then each relax step searched', async () => {
    const r = await berth(['offers', example], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toMatch(/^#\s+LEVEL\s+OFFER\s+MACHINE\s+GPU\s+VRAM\s+BILLED\/H\s+RELIABILITY\s+WHERE$/);
    expect(lines[1]).toMatch(/^1\s+\d\s+\d+\s+\d+\s+1x RTX \S+\s+\d{5} MB\s+\$0\.\d{4}\s/);
    expect(r.stdout).toContain('level 0 (the spec as written): ');
    expect(r.stdout).toContain('level 1 (dropped filter verified): ');
    expect(r.stdout).toContain('level 2 (set gpu_name in [RTX 4090, RTX 3090, RTX A6000]): ');
    expect(r.stdout).toMatch(/\d+ returned, \d+ above the price cap, \d+ usable new/);
  });

  it('--json: every offer within the cap on its billed price, in the order a run takes them (level by level)', async () => {
    const r = await berth(['offers', example, '--json', '--limit', '1000'], env);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as OffersReport;
    expect(report.levels.map((l) => [l.level, l.searched])).toEqual([
      [0, true],
      [1, true],
      [2, true],
    ]);
    expect(report.offers.length).toBeGreaterThan(0);
    expect(report.offers.length).toBe(report.levels.reduce((n, l) => n + l.added, 0));
    for (const o of report.offers) expect(o.billed_usd_per_hour).toBeLessThanOrEqual(report.max_price_per_hour);
    const levels = report.offers.map((o) => o.level);
    expect(levels).toEqual([...levels].sort((a, b) => a - b));
    expect(new Set(report.offers.map((o) => o.id)).size).toBe(report.offers.length);
    // A cap no offer meets: nothing usable, and every returned offer counted above the cap.
    const capped = await berth(['offers', example, '--json', '--set', 'max_price_per_hour=0.001'], env);
    const none = JSON.parse(capped.stdout) as OffersReport;
    expect(none.offers).toEqual([]);
    for (const l of none.levels) expect(l.over_cap).toBe(l.returned);
  });
});

describe('GPU memory in GB (issue #50)', () => {
  const t4Spec = (gpuRam: string) =>
    write(
      'vram.yaml',
      `name: t4\nimage: pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime\nsearch:\n  filters:\n    num_gpus: { eq: 1 }\n    gpu_ram: ${gpuRam}\n  order: [[dph_total, asc]]\nmax_price_per_hour: 5\nrelax: []\n`,
    );

  it('gpu_ram: {gte: "16GB"} finds the 16 GB Tesla T4 (listing 15360 MB) at its price; gte 16000 leaves it out, and validate says so', async () => {
    // The simulator's T4 offers, asked for by name: their billed prices.
    const byName = JSON.parse(
      (await berth(['offers', t4Spec('{ gte: 1 }'), '--json', '--set', 'search.filters.gpu_name.eq=Tesla T4'], env)).stdout,
    ) as OffersReport;
    expect(byName.offers.length).toBeGreaterThan(0);
    expect(byName.offers.every((o) => o.gpu_ram === 15360)).toBe(true);

    const gb = await berth(['offers', t4Spec('{ gte: "16GB" }'), '--json'], env);
    expect(gb.code).toBe(0);
    const found = (JSON.parse(gb.stdout) as OffersReport).offers;
    const t4s = found.filter((o) => o.gpu_name === 'Tesla T4');
    expect(t4s.map((o) => [o.id, o.billed_usd_per_hour])).toEqual(byName.offers.map((o) => [o.id, o.billed_usd_per_hour]));
    // Cheapest first: the T4 is the cheapest card of 16 GB or more.
    expect(found[0]!.gpu_name).toBe('Tesla T4');
    expect(found.every((o) => o.gpu_ram >= 15259)).toBe(true);

    const mb = JSON.parse((await berth(['offers', t4Spec('{ gte: 16000 }'), '--json'], env)).stdout) as OffersReport;
    expect(mb.offers.filter((o) => o.gpu_name === 'Tesla T4')).toEqual([]);
    const warned = await berth(['validate', t4Spec('{ gte: 16000 }')], env);
    expect(warned.code).toBe(0);
    expect(warned.stderr).toContain('warning: search.filters.gpu_ram.gte: 16000 MB leaves out cards sold as 16 GB');
    expect(warned.stderr).toContain('write gte: "16GB"');
  });

  it('--json prints the whole report without --limit: every offer, each with its gpu_ram', async () => {
    const r = await berth(['offers', example, '--json'], env);
    const report = JSON.parse(r.stdout) as OffersReport;
    expect(report.offers.length).toBe(report.levels.reduce((n, l) => n + l.added, 0));
    expect(report.offers.length).toBeGreaterThan(20);
    for (const o of report.offers) expect(typeof o.gpu_ram).toBe('number');
  });
});

describe('GPU names checked against the service', () => {
  const typo = (filters: string) =>
    write(
      'typo.yaml',
      `name: t\nimage: pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime\nsearch:\n  filters:\n    ${filters}\nmax_price_per_hour: 0.5\n`,
    );

  it('validate names a GPU the service does not know, with the nearest one it knows (exit 2)', async () => {
    const r = await berth(['validate', typo('gpu_name: { eq: RTX 4900 }')], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /\$\.search\.filters\.gpu_name\.eq: "RTX 4900" is not a GPU the service knows; did you mean "RTX 4090"\? \(line 5, column \d+\)/,
    );
  });

  it('checks each name of an `in` list, and offers refuses the same spec before asking the daemon (exit 2)', async () => {
    const file = typo('gpu_name: { in: [RTX 4090, RTX 3900] }');
    const r = await berth(['offers', file], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /\$\.search\.filters\.gpu_name\.in\[1\]: "RTX 3900" is not a GPU the service knows; did you mean "RTX 3090"\?/,
    );
    expect(r.stderr).not.toContain('"RTX 4090" is not');
  });

  it('validate asks the names again once after a 429, after the interval it names, and checks them (exit 2 for a typo)', async () => {
    let calls = 0;
    const service = createHttpServer((req, res) => {
      calls++;
      if (calls === 1)
        res.writeHead(429, { 'content-type': 'application/json' }).end('{"detail": "API requests too frequent endpoint threshold=2.0"}');
      else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ gpu_names: ['RTX 4090', 'RTX 3090'] }));
    });
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = service.address() as { port: number };
      const r = await berth(
        ['validate', typo('gpu_name: { eq: RTX 4900 }')],
        userEnv(join(dir, 'limited-home'), { BERTH_API_URL: `http://127.0.0.1:${port}` }),
      );
      expect(calls).toBe(2);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('did you mean "RTX 4090"?');
      expect(r.stderr).not.toContain('were not checked');
    } finally {
      await new Promise<void>((resolve) => service.close(() => resolve()));
    }
  });

  it('validate passes with a warning when the service cannot be reached (exit 0)', async () => {
    const offline = userEnv(join(dir, 'offline-home'), { BERTH_API_URL: `http://127.0.0.1:${await closedPort()}` });
    const r = await berth(['validate', example], offline);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('is a valid job spec');
    expect(r.stderr).toMatch(/^Warning: the GPU names of .*job\.yaml were not checked: http:\/\/127\.0\.0\.1:\d+ could not be reached/);
  });
});
