// The client's cloud calls against the real simulator over HTTP: the account's connections, a cloud
// copy from a stopped instance read to its end through the instance's status_msg
// (cloud-copy-status.ts), a copy that fails halfway, and refusals (a 400, a key without
// instance_write, bad input) as typed errors, never retried. The simulator's clock is a manual one.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cloudCopyFailed, cloudCopyFinished } from '../../../src/client/cloud-copy-status.js';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import type { CloudConnection, CloudTransfer } from '../../../src/client/types.js';
import { BerthError, PermissionError, ServiceHttpError } from '../../../src/errors.js';
import { startSimulator, type RunningSimulator } from '../../../src/sim/index.js';
import { testConfig } from '../../unit/client/fake-server.js';

const READ_ONLY_KEY = 'read-only-key-0123456789';
const clock = { now: 2_000_000_000 };
let sim: RunningSimulator;
let bucket: string;
let client: MarketplaceClient;
let readOnly: MarketplaceClient;

beforeAll(async () => {
  bucket = mkdtempSync(join(tmpdir(), 'berth-client-bucket-'));
  sim = await startSimulator({
    now: () => clock.now,
    config: {
      admin: true,
      rate_limits: { enabled: false },
      lifecycle: { provision_s: 0, boot_s: { min: 1, max: 1 } },
      onstart_exec: { enabled: true, timeout_s: 20 },
      cloud: {
        connections: [
          { name: ' my-s3 ', cloud_type: 's3', dir: bucket },
          { id: 9, name: 'hf-data', cloud_type: 'hf', dir: bucket },
        ],
      },
      keys: [{ key: READ_ONLY_KEY, permissions: { api: { user_read: {}, instance_read: {} } } }],
    },
  });
  client = createMarketClient({ baseUrl: sim.url, apiKey: sim.apiKey, config: testConfig() });
  readOnly = createMarketClient({ baseUrl: sim.url, apiKey: READ_ONLY_KEY, config: testConfig() });
});
afterAll(async () => {
  await Promise.all([client.close(), readOnly.close()]);
  await sim.close();
  rmSync(bucket, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A stopped instance whose task wrote out/model.bin (200 kB) and out/log.txt. */
async function stoppedInstanceWithOutputs(): Promise<number> {
  const [offer] = await client.searchOffers({ limit: 1 });
  const onstart = 'mkdir -p out && head -c 200000 /dev/urandom > out/model.bin && echo ok > out/log.txt && echo done';
  const { instanceId } = await client.createInstance(offer!.id, { image: 'x', disk: 16, label: `cloud-${clock.now}`, onstart });
  clock.now += 2000;
  await until(() => sim.history().find((h) => h.id === instanceId)?.onstart?.stdout === 'done\n', 'the task');
  await client.setInstanceState(instanceId, 'stopped');
  return instanceId;
}

const statusMsg = async (id: number) => (await client.showInstance(id))?.status_msg ?? null;

describe('cloud connections and the cloud copy through the client', () => {
  it('lists the connections as {id, name, type} (show_connections.yaml cloud_type), names trimmed', async () => {
    const expected: CloudConnection[] = [
      { id: 1001, name: 'my-s3', type: 's3' },
      { id: 9, name: 'hf-data', type: 'hf' },
    ];
    expect(await client.listCloudConnections()).toEqual(expected);
    // user_read is enough to list them (permissions.mdx, Show Connections).
    expect(await readOnly.listCloudConnections()).toHaveLength(2);
  });

  it('copies from a stopped instance into the bucket; the status bar says Finished only ~30 s later', async () => {
    const id = await stoppedInstanceWithOutputs();
    const before = await statusMsg(id);
    await client.startCloudCopy({ instanceId: id, src: '/root/out', dst: 'runs/one', connectionId: 1001, transfer: 'Instance To Cloud' });
    clock.now += 2000; // 200 kB at 50 MB/s: the bytes land after 1 sim s
    await until(() => sim.cloudCopies().some((c) => c.instance_id === id && c.state === 'finished'), 'the bytes to land');
    // The bytes are there, the status bar is not yet: neither finished nor failed can be read.
    expect(await statusMsg(id)).toBe(before);
    expect(cloudCopyFinished(before) || cloudCopyFailed(before)).toBe(false);
    clock.now += 29_000; // 31 s after the request: its progress lines are in, the landing's 30 s are not up
    const progress = await statusMsg(id);
    expect(progress).toMatch(/Cloud Copy in progress/);
    expect(cloudCopyFinished(progress) || cloudCopyFailed(progress)).toBe(false);
    clock.now += 2_000; // 31 s after the landing
    const done = await statusMsg(id);
    expect(cloudCopyFinished(done)).toBe(true);
    expect(cloudCopyFailed(done)).toBe(false);
    expect(readdirSync(join(bucket, 'runs', 'one')).sort()).toEqual(['log.txt', 'model.bin']);
    expect(statSync(join(bucket, 'runs', 'one', 'model.bin')).size).toBe(200_000);
    expect(readFileSync(join(bucket, 'runs', 'one', 'log.txt'), 'utf8')).toBe('ok\n');
    expect((await client.showInstance(id))?.actual_status).toBe('stopped');
  });

  it('a copy that fails halfway reads as failed, never as finished', async () => {
    const id = await stoppedInstanceWithOutputs();
    sim.setFaults({ cloud_copy_fail_rate: 1 });
    try {
      await client.startCloudCopy({ instanceId: id, src: 'out', dst: 'runs/half', connectionId: 9, transfer: 'Instance To Cloud' });
      clock.now += 2000;
      await until(() => sim.cloudCopies().some((c) => c.instance_id === id && c.state === 'failed'), 'the failure');
    } finally {
      sim.setFaults({ cloud_copy_fail_rate: 0 });
    }
    clock.now += 31_000;
    const msg = await statusMsg(id);
    expect(cloudCopyFailed(msg)).toBe(true);
    expect(cloudCopyFinished(msg)).toBe(false);
  });

  it('refusals are typed and sent once: a 400 (unknown connection), a key without instance_write; bad input is never sent', async () => {
    const id = await stoppedInstanceWithOutputs();
    const route = 'POST /api/v0/commands/rclone/';
    const sent = () => sim.stats().requests[route] ?? 0;
    const start = sent();
    const unknown = await client
      .startCloudCopy({ instanceId: id, src: 'out', dst: 'x', connectionId: 4242, transfer: 'Instance To Cloud' })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(ServiceHttpError);
    expect(unknown).toMatchObject({ code: 'bad_request', status: 400 });
    expect(sent() - start).toBe(1);

    const denied = await readOnly
      .startCloudCopy({ instanceId: id, src: 'out', dst: 'x', connectionId: 1001, transfer: 'Instance To Cloud' })
      .catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(PermissionError);
    expect(sent() - start).toBe(2);

    const bad = await client
      .startCloudCopy({ instanceId: id, src: 'out', dst: 'x', connectionId: 0, transfer: 'Instance To Cloud' })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(BerthError);
    expect(bad).toMatchObject({ code: 'bad_request', message: expect.stringContaining('connectionId') });
    const badTransfer = await client
      .startCloudCopy({ instanceId: id, src: 'out', dst: 'x', connectionId: 1001, transfer: 'Cloud To Cloud' as CloudTransfer })
      .catch((e: unknown) => e);
    expect(badTransfer).toMatchObject({ code: 'bad_request', message: expect.stringContaining('transfer') });
    expect(sent() - start).toBe(2);
  });
});

describe('cloud-copy-status', () => {
  it('reads the documented phrase in any case and with other words around it; null and other lines are neither', () => {
    expect(cloudCopyFinished('Cloud Copy Operation Finished')).toBe(true);
    expect(cloudCopyFinished('cloud copy operation finished \n')).toBe(true);
    expect(cloudCopyFinished(null)).toBe(false);
    expect(cloudCopyFinished('Instance stopped')).toBe(false);
    expect(cloudCopyFailed('Cloud Copy Operation Failed: connection to the cloud lost after 5 bytes')).toBe(true);
    expect(cloudCopyFailed('Cloud Copy Operation Canceled')).toBe(true);
    expect(cloudCopyFailed('Cloud Copy Operation Finished')).toBe(false);
    expect(cloudCopyFailed(undefined)).toBe(false);
  });
});
