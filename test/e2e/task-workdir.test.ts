// A task's workdir end to end (issue #40 item 1), with a spawned daemon, the built CLI and the
// simulator's real sshd per instance (its commands real processes in the instance's directory,
// where /root lands): `berth submit` packs the directory next to the spec, the daemon uploads it
// into /root/workdir on every attempt, and `run: python3 train.py` runs from it (no code in the
// image); a workdir over the daemon's cap, or sent while berth's SSH key cannot be used, is refused
// at submit, nothing stored or rented; one the host refuses gives its instance up at once.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import type { Run as RunView, RunEvent } from '../../src/wire/control-api.js';
import { loadLoginKey } from '../../src/ssh/key-pair.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();

/** A simulator whose instances run an sshd that takes berth's key, a daemon, and a project dir with a spec. */
async function start(config: Record<string, unknown> = {}) {
  const { home, sim, daemon } = await world.sshWorld({ seed: 40, config, onstartTimeoutS: 120 });
  const project = world.home('berth-project-');
  return { home, sim, daemon, project, env: userEnv(home) };
}

/** The training code: it runs only from its workdir, prints what it sees there, and writes out/model.bin. */
const TRAIN_PY = [
  'import hashlib, os, time',
  'from lib.settings import LR',
  'time.sleep(float(os.environ.get("TRAIN_SLEEP", "0")))',
  'os.makedirs("out", exist_ok=True)',
  'data = bytes(range(256)) * 64',
  'open("out/model.bin", "wb").write(data)',
  'print("cwd", os.getcwd().endswith("/workdir"), "lr", LR, "files", sorted(os.listdir(".")))',
  'print("model", hashlib.sha256(data).hexdigest()[:12])',
  '',
].join('\n');

function writeProject(project: string, spec: Record<string, unknown>): string {
  mkdirSync(join(project, 'code', 'lib'), { recursive: true });
  writeFileSync(join(project, 'code', 'train.py'), TRAIN_PY);
  writeFileSync(join(project, 'code', 'lib', '__init__.py'), '');
  writeFileSync(join(project, 'code', 'lib', 'settings.py'), 'LR = 0.25\n');
  writeFileSync(join(project, 'code', 'secrets.env'), 'TOKEN=never-shipped\n');
  writeFileSync(join(project, 'code', 'notes.log'), 'ignored by git\n');
  writeFileSync(join(project, 'code', '.gitignore'), '*.log\n__pycache__/\n');
  writeFileSync(join(project, 'code', '.berthignore'), 'secrets.env\n');
  const file = join(project, 'job.json');
  writeFileSync(file, JSON.stringify(spec));
  return file;
}

const taskSpec = (extra: Record<string, unknown> = {}) =>
  jobSpec({ ready_when: 'status', run: 'python3 train.py', workdir: './code', ...extra });

const events = async (daemon: { api: <T>(m: 'GET', p: string) => Promise<{ body: T }> }, runId: string) =>
  (await daemon.api<RunEvent[]>('GET', `/v1/runs/${runId}/events`)).body;

it('a task whose run is python3 train.py from its workdir succeeds in it; ignored files never reach the instance', async () => {
  const { daemon, project, env, sim } = await start();
  const file = writeProject(project, taskSpec());
  const submitted = await berth(['submit', file], env, 60_000);
  expect(submitted.stderr).toMatch(/Packed workdir .*code: 5 files/);
  expect(submitted.code).toBe(0);
  const runId = submitted.stdout.trim();
  const done = await daemon.waitFor(runId, isEnded, 90_000);
  expect(done.state).toBe('succeeded');
  const logs = done.attempts[0]!.logs ?? '';
  expect(logs).toContain("cwd True lr 0.25 files ['.berth-ready', '.berthignore', '.gitignore', 'lib', 'out', 'train.py']");
  expect(logs).toMatch(/model [0-9a-f]{12}/);
  const uploaded = (await events(daemon, runId)).filter((e) => e.type === 'workdir.uploaded');
  expect(uploaded).toHaveLength(1);
  expect(uploaded[0]!.data).toMatchObject({ n: 1, method: 'tar', bytes: expect.any(Number), seconds: expect.any(Number) });
  // Nothing of the workdir's content in any event.
  expect(JSON.stringify(await events(daemon, runId))).not.toContain('never-shipped');
  expect(sim.billingNow()).toEqual([]);
});

it('the workdir is uploaded again on a second attempt after the first instance failed; the task succeeds there and berth outputs gives its model.bin byte for byte', async () => {
  const { daemon, project, env, sim } = await start();
  // Long enough on the first instance for its host to fail mid-task.
  const file = writeProject(project, taskSpec({ env: { TRAIN_SLEEP: '4' }, max_attempts: 3, outputs: ['out/model.bin'] }));
  const submitted = await berth(['submit', file], env, 60_000);
  expect(submitted.code).toBe(0);
  const runId = submitted.stdout.trim();
  let first: RunEvent | undefined;
  for (let i = 0; i < 600 && !first; i++) {
    first = (await events(daemon, runId)).find((e) => e.type === 'workdir.uploaded');
    if (!first) await sleep(100);
  }
  expect(first).toBeDefined();
  const view = (await daemon.api<RunView>('GET', `/v1/runs/${runId}`)).body;
  expect(sim.takeMachineOffline(view.attempts[0]!.machine_id!)).toHaveLength(1);
  const done = await daemon.waitFor(runId, isEnded, 120_000);
  expect(done.state).toBe('succeeded');
  expect(done.attempts.map((a) => a.outcome)).toEqual(['lost', 'succeeded']);
  const uploads = (await events(daemon, runId)).filter((e) => e.type === 'workdir.uploaded');
  expect(uploads.map((e) => (e.data as { n: number }).n)).toEqual([1, 2]);
  expect(done.attempts[1]!.logs).toContain('cwd True lr 0.25');
  expect(sim.billingNow()).toEqual([]);
  // The model train.py wrote on the second instance, copied out as it was (issue #40's Done when).
  const dest = world.home('berth-outputs-');
  const copied = await berth(['outputs', runId, dest], env, 60_000);
  expect(copied.code, copied.stderr).toBe(0);
  expect(readFileSync(join(dest, 'out', 'model.bin')).equals(Buffer.from(Array.from({ length: 256 * 64 }, (_, i) => i % 256)))).toBe(true);
});

it("a workdir submitted while berth's SSH key cannot be used is refused with exit 2 and the fix; nothing is rented (issue #48)", async () => {
  const { home, project, env, sim } = await start();
  const key = loadLoginKey({ home }).path;
  chmodSync(key, 0o644);
  const file = writeProject(project, taskSpec());
  const r = await berth(['submit', file], env, 60_000);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('workdir');
  expect(r.stderr).toContain(`chmod 600 ${key}`);
  expect(r.stdout).toBe('');
  expect(sim.ledger().instances).toEqual([]);
  const db = new Database(join(home, 'berth.db'), { readonly: true });
  try {
    expect(db.prepare('SELECT count(*) AS n FROM runs').get()).toEqual({ n: 0 });
  } finally {
    db.close();
  }
});

it('a workdir upload the host refuses (its key refused) gives the instance up at once: the task never starts, the attempt fails over (issue #48)', async () => {
  // files.upload_timeout_s at its default, 600 s: the wrapper would hold the instance that long.
  const { home, sim, daemon } = await world.sshWorld({ seed: 40, sim: { faults: { ssh_refuse_keys: true } }, onstartTimeoutS: 120 });
  const project = world.home('berth-project-');
  const file = writeProject(project, taskSpec({ max_attempts: 1 }));
  const submitted = await berth(['submit', file], userEnv(home), 60_000);
  expect(submitted.code).toBe(0);
  const runId = submitted.stdout.trim();
  const done = await daemon.waitFor(runId, isEnded, 120_000);
  expect(done.state).toBe('failed');
  expect(done.attempts.map((a) => [a.outcome, a.detail])).toEqual([
    ['unreachable', `the workdir could not be put on instance ${done.attempts[0]!.instance_id} (ssh_auth_refused): the task never started`],
  ]);
  const failed = (await events(daemon, runId)).filter((e) => e.type === 'workdir.upload_failed');
  expect(failed.map((e) => e.message)).toEqual([
    expect.stringMatching(/\(ssh_auth_refused\); its task will not start, so the instance is given up now/),
  ]);
  expect(sim.billingNow()).toEqual([]);
});

it("a workdir over the daemon's files.workdir_max_mb is refused at submit with exit 2, and nothing is stored", async () => {
  const { home, project, env } = await start({ files: { workdir_max_mb: 1 } });
  const file = writeProject(project, taskSpec());
  // 2 MB that does not compress.
  writeFileSync(join(project, 'code', 'weights.bin'), randomBytes(2_000_000));
  const r = await berth(['submit', file], env, 60_000);
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/workdir/);
  expect(r.stderr).toMatch(/files\.workdir_max_mb/);
  const db = new Database(join(home, 'berth.db'), { readonly: true });
  try {
    expect(db.prepare('SELECT count(*) AS n FROM runs').get()).toEqual({ n: 0 });
    expect(db.prepare('SELECT count(*) AS n FROM blobs').get()).toEqual({ n: 0 });
  } finally {
    db.close();
  }
});
