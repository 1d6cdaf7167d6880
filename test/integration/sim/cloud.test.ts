// Cloud connections and the cloud copy: the account's connections as show_connections.yaml lists
// them, a copy between an instance (running or stopped) and the local folder standing for the
// bucket, its lines in the status bar status_delay_s late, a copy that fails halfway, a cancel, and
// the documented refusals. The clock is a manual one, so "not yet" and "now" are exact.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, startTestSim, waitFor } from './helpers.js';

const clock = { now: 1_000_000_000 };
const advance = (s: number) => (clock.now += s * 1000);
let sim: RunningSimulator;
let bucket: string;
const READER = 'reader-key-0001';
const NO_USER = 'instance-only-key';

beforeAll(async () => {
  bucket = mkdtempSync(join(tmpdir(), 'berth-sim-bucket-'));
  sim = await startTestSim({
    timeScale: 1,
    now: () => clock.now,
    config: {
      lifecycle: { provision_s: 0, boot_s: { min: 1, max: 1 } },
      onstart_exec: { enabled: true, timeout_s: 20 },
      cloud: {
        connections: [
          { name: 'my-s3', cloud_type: 's3', dir: bucket },
          { id: 77, name: 'other', dir: bucket },
        ],
      },
      keys: [
        { key: READER, permissions: { api: { user_read: {}, instance_read: {} } } },
        { key: NO_USER, permissions: { api: { instance_read: {}, instance_write: {} } } },
      ],
    },
  });
});
afterAll(async () => {
  await sim.close();
  rmSync(bucket, { recursive: true, force: true });
});

const msgOf = async (id: number): Promise<string> => (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances.status_msg;

/** A running instance whose onstart wrote `script`'s files, done. */
async function instanceWith(script: string): Promise<number> {
  const { instanceId } = await rent(sim, { image: 'x', onstart: `${script}; echo done` });
  advance(2);
  await waitFor(() => (sim.history().find((h) => h.id === instanceId)?.onstart?.stdout === 'done\n' ? true : undefined), 10_000, 'onstart');
  return instanceId;
}

const FILES = 'mkdir -p out/sub && head -c 300000 /dev/urandom > out/model.bin && echo hi > out/sub/a.txt';

function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
  );
}

describe('cloud connections', () => {
  test('GET /users/cloud_integrations/ lists them as show_connections.yaml does: a bare array of {id, name, cloud_type}', async () => {
    const r = await call(sim, 'GET', '/api/v0/users/cloud_integrations/');
    expect(r.status).toBe(200);
    expect(r.body).toEqual([
      { id: 1001, name: 'my-s3', cloud_type: 's3' },
      { id: 77, name: 'other', cloud_type: 's3' },
    ]);
  });

  test('listing needs user_read; copying and cancelling need instance_write (permissions.mdx)', async () => {
    expect((await call(sim, 'GET', '/api/v0/users/cloud_integrations/', undefined, NO_USER)).status).toBe(403);
    expect((await call(sim, 'GET', '/api/v0/users/cloud_integrations/', undefined, READER)).status).toBe(200);
    const body = { src: '/root/out', dst: 'b', instance_id: '1', selected: '1001', transfer: 'Instance To Cloud', flags: [] };
    expect((await call(sim, 'POST', '/api/v0/commands/rclone/', body, READER)).body.permission).toBe('instance_write');
    expect((await call(sim, 'DELETE', '/api/v0/commands/rclone/', { dst_id: 1 }, READER)).status).toBe(403);
  });
});

describe('cloud copy', () => {
  test('from a stopped instance into the bucket folder; its lines reach the status bar status_delay_s (30 s) late', async () => {
    const id = await instanceWith(FILES);
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' })).status).toBe(200);
    const stoppedMsg = await msgOf(id);
    // The CLI's body (vast-cli cloud_copy): ids as strings.
    const r = await call(sim, 'POST', '/api/v0/commands/rclone/', {
      src: '/root/out',
      dst: 'runs/r1',
      instance_id: String(id),
      selected: '1001',
      transfer: 'Instance To Cloud',
      flags: [],
    });
    expect(r.status).toBe(200);
    expect(r.body.success).toBe(true);
    expect(await msgOf(id)).toBe(stoppedMsg);
    advance(29); // the bytes land now (300 kB at 50 MB/s), but the status bar is 30 s behind
    await waitFor(() => (sim.cloudCopies().find((c) => c.instance_id === id)?.state === 'finished' ? true : undefined), 5000, 'landed');
    expect(await msgOf(id)).toBe(stoppedMsg);
    advance(2);
    expect(await msgOf(id)).toMatch(/^Cloud Copy in progress/);
    advance(30);
    expect(await msgOf(id)).toBe('Cloud Copy Operation Finished');
    // rclone copy: the directory's contents, not the directory, under the destination.
    const dest = join(bucket, 'runs', 'r1');
    expect(filesUnder(dest).sort()).toEqual(['model.bin', 'sub/a.txt']);
    expect(statSync(join(dest, 'model.bin')).size).toBe(300_000);
    expect(readFileSync(join(dest, 'sub', 'a.txt'), 'utf8')).toBe('hi\n');
    // The instance stayed stopped throughout.
    expect((await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances.actual_status).toBe('stopped');
  });

  test('a copy that fails halfway writes the first half of the bytes and says it failed', async () => {
    const id = await instanceWith(FILES);
    sim.setFaults({ cloud_copy_fail_rate: 1 });
    try {
      const body = { src: 'out', dst: 'half', instance_id: id, selected: 1001, transfer: 'Instance To Cloud' };
      expect((await call(sim, 'POST', '/api/v0/commands/rclone/', body)).status).toBe(200);
      advance(2);
      await waitFor(() => (sim.cloudCopies().find((c) => c.instance_id === id)?.state === 'failed' ? true : undefined), 5000, 'failed');
      advance(31);
      expect(await msgOf(id)).toMatch(/^Cloud Copy Operation Failed/);
    } finally {
      sim.setFaults({ cloud_copy_fail_rate: 0 });
    }
    const written = filesUnder(join(bucket, 'half')).reduce((s, f) => s + statSync(join(bucket, 'half', f)).size, 0);
    expect(written).toBe(Math.floor((300_000 + 3) / 2));
  });

  test('Cloud To Instance (the CLI default\'s case, "Instance to Cloud", read alike): a file goes into the destination folder', async () => {
    const id = await instanceWith('true');
    mkdirSync(join(bucket, 'in'), { recursive: true });
    writeFileSync(join(bucket, 'in', 'data.txt'), 'from the bucket\n');
    const down = { src: 'in/data.txt', dst: '/workspace/got', instance_id: String(id), selected: '77', transfer: 'cloud to instance' };
    expect((await call(sim, 'POST', '/api/v0/commands/rclone/', down)).status).toBe(200);
    advance(2);
    await waitFor(() => (sim.cloudCopies().find((c) => c.instance_id === id)?.state === 'finished' ? true : undefined), 5000, 'down');
    // Back up again into another prefix: the file is in the instance at /root/got/data.txt.
    const up = { src: '/root/got', dst: 'back', instance_id: String(id), selected: '77', transfer: 'Instance to Cloud' };
    expect((await call(sim, 'POST', '/api/v0/commands/rclone/', up)).status).toBe(200);
    advance(2);
    await waitFor(
      () => (sim.cloudCopies().filter((c) => c.instance_id === id && c.state === 'finished').length === 2 ? true : undefined),
      5000,
      'up',
    );
    expect(readFileSync(join(bucket, 'back', 'data.txt'), 'utf8')).toBe('from the bucket\n');
  });

  test('a cancel ends the copies of that instance: nothing lands, the status bar says so (cancel_sync.yaml)', async () => {
    const id = await instanceWith(FILES);
    const body = { src: 'out', dst: 'canceled', instance_id: id, selected: 1001, transfer: 'Instance To Cloud' };
    expect((await call(sim, 'POST', '/api/v0/commands/rclone/', body)).status).toBe(200);
    const c = await call(sim, 'DELETE', '/api/v0/commands/rclone/', { client_id: 'me', dst_id: id });
    expect(c.body).toMatchObject({ success: true });
    advance(40);
    await waitFor(async () => ((await msgOf(id)) === 'Cloud Copy Operation Canceled' ? true : undefined), 5000, 'canceled');
    expect(() => readdirSync(join(bucket, 'canceled'))).toThrow();
    expect((await call(sim, 'DELETE', '/api/v0/commands/rclone/', { dst_id: 12345 })).body).toEqual({
      success: false,
      error: 'no_such_instance',
      msg: 'No such instance.',
    });
    expect((await call(sim, 'DELETE', '/api/v0/commands/rclone/', { dst_id: 'x' })).status).toBe(400);
  });

  test('a destroy before the bytes land abandons the copy: nothing lands', async () => {
    const id = await instanceWith(FILES);
    const body = { src: 'out', dst: 'gone', instance_id: id, selected: 1001, transfer: 'Instance To Cloud' };
    expect((await call(sim, 'POST', '/api/v0/commands/rclone/', body)).status).toBe(200);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${id}/`, {})).status).toBe(200);
    advance(5);
    await waitFor(() => (sim.cloudCopies().find((c) => c.instance_id === id)?.state === 'abandoned' ? true : undefined), 5000, 'abandoned');
    expect(() => readdirSync(join(bucket, 'gone'))).toThrow();
  });

  test("refusals are cloud_copy.yaml's 400 {success: false, msg}: unknown connection, unknown instance, bad transfer", async () => {
    const id = await instanceWith('true');
    const base = { src: '/root', dst: 'x', instance_id: String(id), selected: '1001', transfer: 'Instance To Cloud', flags: [] };
    for (const bad of [{ selected: '999' }, { instance_id: '1' }, { transfer: 'Cloud To Cloud' }, { src: '' }]) {
      const r = await call(sim, 'POST', '/api/v0/commands/rclone/', { ...base, ...bad });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body).sort()).toEqual(['msg', 'success']);
      expect(r.body.success).toBe(false);
    }
    expect(sim.cloudCopies().filter((c) => c.instance_id === id)).toEqual([]);
  });
});
