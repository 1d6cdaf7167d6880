// Files benchmark (issues #40, #48): the product's own transfer path beside OpenSSH's `sftp`, through
// the same server and relay at 0 and 50 ms each way (./files-compare.ts); then the service's cloud
// copy of a file put into a simulated instance with berth's own SFTP writes, started through
// berth's client.
//
// What it measures is the SFTP path on this machine: ssh2's optional native crypto binding is not
// built (as in CI), so its AES-GCM goes through Node's crypto module packet by packet; the server
// is the `ssh2` package's too (in a process of its own), as the simulator's sshd, so OpenSSH's
// `sftp` meets the same server berth does. The cloud copy's pace is the simulator's
// `cloud.copy_mb_per_s`, not a measurement of a cloud.
import { randomFillSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMarketClient } from '../src/client/marketplace-client.js';
import { RATE_GROUPS, type Config } from '../src/config/schema.js';
import { FAST_SIM } from '../src/sim/presets.js';
import { startSimulator, type RunningSimulator } from '../src/sim/index.js';
import { loadLoginKey } from '../src/ssh/key-pair.js';
import { openSshSession, type SshEndpoint } from '../src/ssh/session.js';
import { writeFileFrom } from '../src/ssh/sftp-transfer.js';
import { runFilesCompare } from './files-compare.js';
import type { BenchRow, BenchSection } from './types.js';

const MB = 1_000_000;

export async function runFilesBench(opts: { quick: boolean }): Promise<BenchSection> {
  const sizeMb = opts.quick ? 20 : 100;
  const rows: BenchRow[] = await runFilesCompare(opts);
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
  try {
    const { id, endpoints } = await runningInstance(sim);
    const session = await openSshSession({ endpoints, key, verifyHostKey: () => true });
    try {
      const sftp = await session.sftp();
      await writeFileFrom(
        sftp,
        '/root/up-direct.bin',
        randomFillSync(Buffer.alloc(sizeMb * MB)),
        { from: 0, truncate: true },
        new AbortController().signal,
      );
      sftp.end();
    } finally {
      session.close();
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
  return { title: `Files: berth's own path beside OpenSSH's sftp, and the cloud copy (${sizeMb} MB)`, rows };
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

const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 });
