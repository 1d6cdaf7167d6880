// Files benchmark (issue #40, "100 MB up and 100 MB down through the simulator, throughput
// reported"): one simulated instance with real SSH listeners, berth's own SSH session
// (src/ssh/session.ts) and its SFTP channel: 100 MB put into the container and 100 MB got back,
// over the direct endpoint and over the proxy endpoint, with ssh2's fastPut/fastGet at their
// defaults (32 KiB chunks, 64 requests in flight) and with larger chunks; then the service's cloud
// copy of those 100 MB into the bucket folder, started through berth's client.
//
// What it measures is the SFTP path on this machine: ssh2's optional native crypto binding is not
// built (as in CI), so its AES-GCM goes through Node's crypto module packet by packet, and the
// client and the simulator's sshd share one process and the machine's cores. The simulator's proxy endpoint is the same
// sshd on another port (docs/simulator.md): the proxy/direct ratio says that berth pays nothing for
// choosing one, not what the service's proxy costs (the docs call it slower: data-movement.mdx).
// The cloud copy's pace is the simulator's `cloud.copy_mb_per_s`, not a measurement of a cloud.
import { createHash, randomFillSync } from 'node:crypto';
import { closeSync, createReadStream, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SFTPWrapper, TransferOptions } from 'ssh2';
import { createMarketClient } from '../src/client/marketplace-client.js';
import { RATE_GROUPS, type Config } from '../src/config/schema.js';
import { FAST_SIM } from '../src/sim/presets.js';
import { startSimulator, type RunningSimulator } from '../src/sim/index.js';
import { loadLoginKey } from '../src/ssh/key-pair.js';
import { openSshSession, type SshEndpoint } from '../src/ssh/session.js';
import { median, type BenchRow, type BenchSection } from './types.js';

const MB = 1_000_000;
/** Each transfer is measured this many times; the median is reported. */
const ROUNDS = 3;

interface Variant {
  name: string;
  opts: TransferOptions;
}

/** ssh2's defaults, then larger chunks (the client splits a request above the server's limit). */
const VARIANTS: Variant[] = [
  { name: 'default (32 KiB × 64)', opts: {} },
  { name: '128 KiB × 64', opts: { chunkSize: 128 * 1024, concurrency: 64 } },
];

export async function runFilesBench(opts: { quick: boolean }): Promise<BenchSection> {
  const sizeMb = opts.quick ? 20 : 100;
  const work = mkdtempSync(join(tmpdir(), 'berth-bench-files-'));
  const bucket = join(work, 'bucket');
  mkdirSync(bucket);
  const key = loadLoginKey({ home: join(work, 'home') });
  const sim = await startSimulator({
    config: {
      ...FAST_SIM,
      quirks: { padded_strings: false, unknown_as_minus_one: false },
      account: { ssh_keys: [key.publicLine] },
      cloud: { connections: [{ name: 'bench-bucket', dir: bucket }] },
    },
  });
  const rows: BenchRow[] = [];
  try {
    const local = join(work, 'up.bin');
    const upHash = writeRandom(local, sizeMb * MB);
    const { id, endpoints } = await runningInstance(sim);
    // Rounds alternate the endpoints and chunk sizes, so that the machine's other load falls on all alike.
    const samples = new Map<string, { up: number[]; down: number[] }>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const variant of VARIANTS) {
        for (const endpoint of endpoints) {
          const session = await openSshSession({ endpoints: [endpoint], key, verifyHostKey: () => true });
          try {
            const sftp = await session.sftp();
            const remote = `/root/up-${endpoint.kind}.bin`;
            const t0 = performance.now();
            await transfer(sftp, 'put', local, remote, variant.opts);
            const t1 = performance.now();
            const back = join(work, `down-${endpoint.kind}.bin`);
            await transfer(sftp, 'get', remote, back, variant.opts);
            const t2 = performance.now();
            if (statSync(back).size !== sizeMb * MB || (await hashOf(back)) !== upHash) throw new Error(`${back}: not the bytes sent`);
            rmSync(back);
            const k = `${variant.name} ${endpoint.kind}`;
            const got = samples.get(k) ?? { up: [], down: [] };
            got.up.push(sizeMb / ((t1 - t0) / 1000));
            got.down.push(sizeMb / ((t2 - t1) / 1000));
            samples.set(k, got);
          } finally {
            session.close();
          }
        }
      }
    }
    const speeds = new Map<string, { up: number; down: number }>();
    for (const variant of VARIANTS) {
      for (const endpoint of endpoints) {
        const got = samples.get(`${variant.name} ${endpoint.kind}`)!;
        speeds.set(`${variant.name} ${endpoint.kind}`, { up: median(got.up), down: median(got.down) });
        rows.push({
          metric: `SFTP ${sizeMb} MB up / down, ${endpoint.kind}, ${variant.name}`,
          value: `${fmt(median(got.up))} / ${fmt(median(got.down))} MB/s`,
          note: `median of ${ROUNDS} (up ${range(got.up)}, down ${range(got.down)} MB/s); fastPut then fastGet over one berth session (src/ssh/session.ts) to the simulator's sshd; the file read back is byte-identical (sha256)`,
        });
      }
    }
    const d = speeds.get(`${VARIANTS[0]!.name} direct`);
    const p = speeds.get(`${VARIANTS[0]!.name} proxy`);
    if (d && p) {
      rows.push({
        metric: 'SFTP proxy / direct, up / down (defaults)',
        value: `${(p.up / d.up).toFixed(2)}× / ${(p.down / d.down).toFixed(2)}×`,
        note: "the simulator's proxy is the same sshd on another port: this says berth's choice of endpoint costs nothing here, not what the service's proxy costs",
      });
    }
    const big = speeds.get(`${VARIANTS[1]!.name} direct`);
    if (d && big) {
      rows.push({
        metric: `SFTP ${VARIANTS[1]!.name} / default, up / down (direct)`,
        value: `${(big.up / d.up).toFixed(2)}× / ${(big.down / d.down).toFixed(2)}×`,
        note: 'larger SFTP requests, the same number in flight',
      });
    }
    rows.push(await cloudCopy(sim, id, sizeMb, bucket));
    rows.push({
      metric: "ssh2's native crypto binding",
      value: nativeCrypto() ? 'present' : 'absent (as in CI)',
      note: "node_modules/ssh2/lib/protocol/crypto/build; without it ssh2 still prefers AES-GCM, through Node's crypto module (OpenSSL), one cipher object per packet; its packet framing is JavaScript either way",
    });
  } finally {
    await sim.close();
    rmSync(work, { recursive: true, force: true });
  }
  return { title: `Files: ${sizeMb} MB over SFTP and the cloud copy (simulator)`, rows };
}

interface Answer {
  offers: Array<{ id: number }>;
  new_contract: number;
  instances: {
    actual_status: string | null;
    public_ipaddr: string;
    ssh_host: string;
    ssh_port: number;
    ports?: Record<string, Array<{ HostPort: string }>>;
  } | null;
}

/** A running instance with direct and proxy SSH endpoints. */
async function runningInstance(sim: RunningSimulator): Promise<{ id: number; endpoints: SshEndpoint[] }> {
  const headers = { authorization: `Bearer ${sim.apiKey}`, 'content-type': 'application/json' };
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${sim.url}${path}`, { method, headers, body: body === undefined ? null : JSON.stringify(body) });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Answer;
  };
  const search = await api('POST', '/api/v0/bundles/', { direct_port_count: { gte: 1 }, disk_space: { gte: 20 }, limit: 1 });
  const created = await api('PUT', `/api/v0/asks/${search.offers[0]!.id}/`, { image: 'x', disk: 20, runtype: 'ssh_direc ssh_proxy' });
  const id = created.new_contract;
  for (let i = 0; i < 600; i++) {
    const rec = (await api('GET', `/api/v0/instances/${id}/`)).instances;
    if (rec?.actual_status === 'running') {
      const direct = rec.ports?.['22/tcp']?.[0]?.HostPort;
      return {
        id,
        endpoints: [
          { kind: 'direct', host: rec.public_ipaddr, port: Number(direct) },
          { kind: 'proxy', host: rec.ssh_host, port: rec.ssh_port },
        ],
      };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`instance ${id} never ran`);
}

/** The service's cloud copy of the uploaded file into the bucket folder, from the stopped instance, through berth's client. */
async function cloudCopy(sim: RunningSimulator, id: number, sizeMb: number, bucket: string): Promise<BenchRow> {
  const client = createMarketClient({ baseUrl: sim.url, apiKey: sim.apiKey, config: clientConfig() });
  try {
    await client.setInstanceState(id, 'stopped');
    const [conn] = await client.listCloudConnections();
    const t0 = performance.now();
    await client.startCloudCopy({
      instanceId: id,
      src: '/root/up-direct.bin',
      dst: 'bench',
      connectionId: conn!.id,
      transfer: 'Instance To Cloud',
    });
    let landed = 0;
    for (;;) {
      const c = sim.cloudCopies()[0];
      if (c?.state === 'finished' && landed === 0) landed = performance.now();
      if (c?.state === 'failed') throw new Error(`cloud copy failed: ${c.error}`);
      if (landed > 0 && (await client.showInstance(id))?.status_msg?.includes('Cloud Copy Operation Finished')) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const seen = performance.now();
    const size = statSync(join(bucket, 'bench', 'up-direct.bin')).size;
    if (size !== sizeMb * MB) throw new Error(`the bucket holds ${size} bytes, not ${sizeMb * MB}`);
    return {
      metric: `cloud copy of ${sizeMb} MB into the bucket folder`,
      value: `${fmt(sizeMb / ((landed - t0) / 1000))} MB/s wall (${fmt((landed - t0) / 1000)} s to land, ${fmt((seen - t0) / 1000)} s to "Finished" in status_msg)`,
      note: `time scale ${FAST_SIM.time_scale}: the copy's pace is the simulator's cloud.copy_mb_per_s (50 sim MB/s) plus a real file copy, and the status bar is 30 sim s late; a measure of the simulator, not of a cloud`,
    };
  } finally {
    await client.close();
  }
}

function transfer(sftp: SFTPWrapper, dir: 'put' | 'get', from: string, to: string, opts: TransferOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error | null) => (err ? reject(err) : resolve());
    if (dir === 'put') sftp.fastPut(from, to, opts, done);
    else sftp.fastGet(from, to, opts, done);
  });
}

/** Writes `bytes` random bytes to `path`; returns their sha256. */
function writeRandom(path: string, bytes: number): string {
  const hash = createHash('sha256');
  const fd = openSync(path, 'w');
  const buf = Buffer.alloc(1 << 20);
  try {
    for (let left = bytes; left > 0; left -= buf.length) {
      const part = randomFillSync(buf).subarray(0, Math.min(buf.length, left));
      hash.update(part);
      writeSync(fd, part);
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

function hashOf(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('data', (b) => hash.update(b))
      .on('end', () => resolve(hash.digest('hex')))
      .on('error', reject);
  });
}

function nativeCrypto(): boolean {
  try {
    statSync(new URL('../../node_modules/ssh2/lib/protocol/crypto/build', import.meta.url));
    return true;
  } catch {
    return false;
  }
}

function clientConfig(): Pick<Config, 'service' | 'rate_limits' | 'retry'> {
  return {
    service: { base_url: 'http://127.0.0.1', timeout_s: 30, connect_timeout_s: 5 },
    rate_limits: Object.fromEntries(RATE_GROUPS.map((g) => [g, { per_s: 1000, burst: 1000 }])) as Config['rate_limits'],
    retry: { max_retry_time_s: 30, min_delay_s: 0.05, max_delay_s: 1, factor: 2 },
  };
}

const range = (xs: number[]) => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}`;

const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 });
