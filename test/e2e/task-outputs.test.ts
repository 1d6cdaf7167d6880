// A task's outputs taken by a spawned daemon before its instance's destroy (issue #40 items 2 and 3),
// over SFTP on the simulator's sshd per instance: a task that writes random bytes and exits 0 (or
// non-zero) has them downloaded, checked and kept; `berth outputs RUN DEST` gives the same bytes; a
// download over files.outputs_max_mb is kept in part and marked so; nothing bills afterwards. A
// second `berth outputs` over a changed local file replaces it only with --force (issue #48).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { Run as RunView, RunEvent } from '../../src/wire/control-api.js';
import type { SimConfigInput } from '../../src/sim/index.js';
import { packagePath } from '../../src/package-path.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();

/** A simulator whose instances run an sshd that takes berth's key (on the account), and a daemon. */
async function start(files: Record<string, unknown> = {}, simConfig: SimConfigInput = {}) {
  const { home, sim, daemon } = await world.sshWorld({ seed: 40, sim: simConfig, config: { files } });
  return { home, sim, daemon };
}

/**
 * A task that writes `bytes` random bytes to out/model.bin in its working directory (/root/workdir,
 * $HOME/workdir here: the simulator's container home is the instance's directory), prints their
 * sha256 and exits with `code`. It makes the directory itself: it depends on no `workdir`.
 */
const writes = (bytes: number, code = 0, more = '') =>
  `mkdir -p "$HOME/workdir/out" && cd "$HOME/workdir" && head -c ${bytes} /dev/urandom > out/model.bin && ${more}sha256sum out/model.bin; exit ${code}`;

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** The sha256 the task printed in its log. */
const printedHash = (r: RunView) => /([0-9a-f]{64})\s+out\/model\.bin/.exec(r.attempts[0]!.logs ?? '')?.[1];

/** `berth outputs ...` as a user runs it, against this daemon's home. */
function berth(home: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [packagePath('bin', 'berth.js'), ...args], {
      env: { ...process.env, BERTH_HOME: home },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    p.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    p.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

it("downloads a succeeded task's outputs before the destroy, and `berth outputs RUN DEST` gives the same bytes", async () => {
  const { home, sim, daemon } = await start();
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run: writes(100_000), outputs: ['out/model.bin'] }));
  expect(created.status).toBe(201);
  const done = await daemon.waitFor(created.body.id, isEnded, 90_000);
  expect(done.state).toBe('succeeded');
  expect(sim.billingNow()).toEqual([]);
  const hash = printedHash(done);
  expect(hash).toMatch(/^[0-9a-f]{64}$/);
  expect(done.outputs).toMatchObject([
    { attempt: 1, state: 'kept', files: [{ path: '/root/workdir/out/model.bin', name: 'out/model.bin', size: 100_000, sha256: hash }] },
  ]);

  const dest = mkdtempSync(join(tmpdir(), 'berth-outputs-'));
  try {
    const out = await berth(home, ['outputs', done.id, dest]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const copy = readFileSync(join(dest, 'out', 'model.bin'));
    expect(copy.length).toBe(100_000);
    expect(sha256(copy)).toBe(hash);

    // A second copy over a file the user changed replaces nothing without --force (issue #48).
    writeFileSync(join(dest, 'out', 'model.bin'), 'mine');
    const again = await berth(home, ['outputs', done.id, dest]);
    expect(again.code).toBe(2);
    expect(again.stdout).toBe('');
    expect(again.stderr).toContain(`out/model.bin: ${join(dest, 'out', 'model.bin')} is already there`);
    expect(readFileSync(join(dest, 'out', 'model.bin'), 'utf8')).toBe('mine');
    const forced = await berth(home, ['outputs', done.id, dest, '--force']);
    expect(forced.code).toBe(0);
    expect(sha256(readFileSync(join(dest, 'out', 'model.bin')))).toBe(hash);
  } finally {
    rmSync(dest, { recursive: true, force: true });
  }
  const events = await daemon.api<RunEvent[]>('GET', `/v1/runs/${done.id}/events`);
  const types = events.body.map((e) => e.type);
  expect(types.indexOf('outputs.ended')).toBeGreaterThan(types.indexOf('task.ended'));
  expect(types.indexOf('outputs.ended')).toBeLessThan(types.indexOf('destroy.requested'));
  expect(events.body.find((e) => e.type === 'outputs.ended')!.message).toMatch(
    /outputs kept: 1 file, 100000 bytes in [\d.]+ s of instance time/,
  );
});

it('downloads the outputs of a task that exited non-zero too', async () => {
  const { daemon, sim } = await start();
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run: writes(5_000, 3), outputs: ['out/'] }));
  const done = await daemon.waitFor(created.body.id, isEnded, 90_000);
  expect(done.state).toBe('failed');
  expect(done.error).toMatchObject({ kind: 'task_failed', exit_code: 3 });
  expect(done.outputs).toMatchObject([
    { attempt: 1, state: 'kept', files: [{ name: 'out/model.bin', size: 5_000, sha256: printedHash(done) }] },
  ]);
  expect(sim.billingNow()).toEqual([]);
});

it('a download over files.outputs_max_mb keeps what came, marked partial, and says so in the events', async () => {
  // 1 MiB cap: the first file (0.75 MiB) whole, the second cut at the cap.
  const { daemon, sim, home } = await start({ outputs_max_mb: 1 });
  const run = writes(786_432, 0, 'head -c 786432 /dev/urandom > out/second.bin && ');
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run, outputs: ['out/model.bin', 'out/second.bin'] }));
  const done = await daemon.waitFor(created.body.id, isEnded, 90_000);
  expect(done.state).toBe('succeeded');
  expect(done.outputs).toMatchObject([
    {
      state: 'partial',
      bytes: 1_048_576,
      files: [
        { name: 'out/model.bin', size: 786_432, sha256: printedHash(done) },
        { name: 'out/second.bin', size: 262_144, partial: true },
      ],
    },
  ]);
  const kept = readFileSync(join(home, 'outputs', done.id, 'attempt-1', 'out', 'second.bin'));
  expect(sha256(kept)).toBe(done.outputs[0]!.files[1]!.sha256);
  // The run's folder says whose it is: retention deletes it with the run (outputs-retention.ts).
  const storeId = (JSON.parse(readFileSync(join(home, 'store.json'), 'utf8')) as { store_id: string }).store_id;
  expect(readFileSync(join(home, 'outputs', done.id, '.berth-store'), 'utf8').trim()).toBe(storeId);
  const events = await daemon.api<RunEvent[]>('GET', `/v1/runs/${done.id}/events`);
  expect(events.body.find((e) => e.type === 'outputs.ended')!.message).toMatch(/outputs partial: .*files\.outputs_max_mb reached/);
  expect(sim.billingNow()).toEqual([]);
});

it('outputs to a cloud connection: the instance is stopped while the service copies, then destroyed; the file is in the bucket folder', async () => {
  const bucket = mkdtempSync(join(tmpdir(), 'berth-bucket-'));
  try {
    const { daemon, sim } = await start({}, { cloud: { connections: [{ name: 'my-s3', dir: bucket }] } });
    const spec = jobSpec({ run: writes(200_000), outputs: { paths: ['out/'], cloud: { connection: 'my-s3', path: 'runs/r1' } } });
    const created = await daemon.api<RunView>('POST', '/v1/runs', spec);
    expect(created.status).toBe(201);
    const done = await daemon.waitFor(created.body.id, isEnded, 120_000);
    expect(done.state).toBe('succeeded');
    expect(done.outputs).toMatchObject([{ attempt: 1, state: 'copied', detail: 'my-s3 (id 1001): runs/r1', files: [] }]);
    // rclone copy: the directory's contents under the destination, the same bytes the task wrote.
    expect(sha256(readFileSync(join(bucket, 'runs', 'r1', 'model.bin')))).toBe(printedHash(done));
    // The copy ran while the instance was stopped (its GPU no longer billed), and it was destroyed after.
    const id = done.attempts[0]!.instance_id!;
    const copy = sim.cloudCopies().find((c) => c.instance_id === id)!;
    expect(copy).toMatchObject({ state: 'finished', transfer: 'Instance To Cloud', src: '/root/workdir/out' });
    const history = sim.history().find((h) => h.id === id)!;
    const stoppedAt = history.statuses.find((s) => s.status === 'stopped')!.at.sim_s;
    expect(stoppedAt).toBeLessThanOrEqual(copy.started_s);
    // Stopped from before the copy until the destroy: no start in between.
    expect(history.statuses.filter((s) => s.at.sim_s > stoppedAt).map((s) => s.status)).not.toContain('running');
    expect(history.destroyed_at).not.toBeNull();
    expect(history.destroyed_at!.sim_s).toBeGreaterThanOrEqual(copy.lands_s);
    expect(sim.billingNow()).toEqual([]);
    const events = await daemon.api<RunEvent[]>('GET', `/v1/runs/${done.id}/events`);
    expect(events.body.find((e) => e.type === 'outputs.ended')!.message).toMatch(
      /outputs copied to my-s3 \(id 1001\): runs\/r1 in [\d.]+ s/,
    );
    // berth saw the stop while the copy ran: from there its spend counts the disk's price, not the GPU's.
    const types = events.body.map((e) => `${e.type} ${e.message}`);
    const stopSeen = types.findIndex((t) => t.startsWith('attempt.status') && t.endsWith(`instance ${id} is stopped`));
    expect(stopSeen).toBeGreaterThan(-1);
    expect(stopSeen).toBeLessThan(types.findIndex((t) => t.startsWith('outputs.ended')));
  } finally {
    rmSync(bucket, { recursive: true, force: true });
  }
});
