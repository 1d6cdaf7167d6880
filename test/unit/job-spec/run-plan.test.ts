// A run's plan (src/job-spec/run-plan.ts): made once at submission, stored with a version, read
// back through the same parse, older versions migrated.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { planRun, readStoredPlan, STORED_SPEC_VERSION, storedSpecText, StoredSpecError } from '../../../src/job-spec/run-plan.js';
import { parseJobSpec } from '../../../src/job-spec/validate.js';

const runs = loadConfig({}, {}).config.runs;
const base = { name: 'j', image: 'img:1', max_price_per_hour: 0.5 };
const planOf = (extra: Record<string, unknown>) => planRun(parseJobSpec({ ...base, ...extra }), runs);

describe('planRun', () => {
  it('fills the limits and the relax ladder from the configuration, and decides task, bid and idle once', () => {
    const plan = planOf({});
    expect(plan).toMatchObject({
      relax: runs.relax,
      max_attempts: runs.max_attempts,
      boot_timeout_s: runs.boot_timeout_s,
      deadline_s: runs.deadline_s,
      ready_when: 'ssh',
      task: null,
      bid: null,
      idle: null,
    });
    expect(plan).not.toHaveProperty('bid_step_pct');
    expect(plan).not.toHaveProperty('max_restarts');
  });

  it('a task, a bid and an idle limit carry their defaults', () => {
    const plan = planOf({ run: 'python train.py', search: { type: 'bid' }, bid_price: 0.2, idle_timeout_s: 600 });
    expect(plan.task).toEqual({
      run: 'python train.py',
      maxRestarts: 0,
      keepOnFailureS: 0,
      warmIdleS: 0,
      dir: '/root/workdir',
      workdirSha256: null,
    });
    expect(plan.bid).toEqual({ price: 0.2, stepPct: 10, onOutbid: 'rebid' });
    expect(plan.idle).toEqual({ timeoutS: 600, gpuUtilPct: 5 });
    expect(plan).toMatchObject({ max_restarts: 0, bid_step_pct: 10, on_outbid: 'rebid', idle_gpu_util_pct: 5 });
  });

  it("a task's workdir lands in workdir_dest, /root/workdir by default, which the stored spec then says", () => {
    const sha = 'a'.repeat(64);
    const plan = planOf({ run: 'python3 train.py', workdir: './code', workdir_sha256: sha });
    expect(plan.task).toMatchObject({ dir: '/root/workdir', workdirSha256: sha });
    expect(plan).toMatchObject({ workdir_dest: '/root/workdir' });
    expect(planOf({ run: 'x', workdir: 'c', workdir_dest: '/srv/app', workdir_sha256: sha }).task).toMatchObject({ dir: '/srv/app' });
    expect(planOf({ run: 'x' })).not.toHaveProperty('workdir_dest');
  });

  it('a task is ready when the service lists it running; a run without a task waits for SSH unless it says "status"', () => {
    expect(planOf({ run: 'python train.py' }).ready_when).toBe('status');
    expect(planOf({ run: 'python train.py', ready_when: 'status' }).ready_when).toBe('status');
    expect(planOf({}).ready_when).toBe('ssh');
    expect(planOf({ ready_when: 'status' }).ready_when).toBe('status');
    // Written into the stored spec, so that it says what runs.
    expect(JSON.parse(storedSpecText(planOf({ run: 'x' })))).toMatchObject({ ready_when: 'status' });
  });

  it("the spec's own values win over the defaults", () => {
    const plan = planOf({
      run: 'x',
      max_restarts: 2,
      search: { type: 'bid' },
      bid_price: 'min',
      bid_step_pct: 25,
      on_outbid: 'failover',
      idle_timeout_s: 600,
      idle_gpu_util_pct: 12,
      max_attempts: 9,
      ready_when: 'status',
    });
    expect(plan).toMatchObject({ task: { run: 'x', maxRestarts: 2 }, bid: { price: 'min', stepPct: 25, onOutbid: 'failover' } });
    expect(plan).toMatchObject({ idle: { timeoutS: 600, gpuUtilPct: 12 }, max_attempts: 9, ready_when: 'status' });
  });
});

describe('stored plans', () => {
  it('read back equal to the plan stored, for every kind of spec', () => {
    for (const extra of [
      {},
      { run: 'echo hi', max_restarts: 1, env: { TOKEN: 'secret-value' } },
      { env: { MODEL: 'llama' }, secrets: { HF_TOKEN: 'hf_secret' } },
      { search: { type: 'bid', filters: { gpu_name: { in: ['RTX 4090'] } } }, bid_price: 'min' },
      { idle_timeout_s: 600, max_runtime_s: 3600, budget_usd: 5, relax: [{ drop: ['gpu_name'] }] },
    ]) {
      const plan = planOf(extra);
      const text = storedSpecText(plan);
      expect(JSON.parse(text)).toMatchObject({ berth_spec_version: STORED_SPEC_VERSION });
      expect(JSON.parse(text)).not.toHaveProperty('task');
      expect(readStoredPlan(text)).toEqual(plan);
    }
  });

  it('a version 1 spec (no version; stored before ready_when and the filled defaults) reads as it ran', () => {
    const v1 = {
      ...base,
      disk_gb: 20,
      search: { filters: {}, order: [['dph_total', 'asc']], type: 'bid', limit: 64 },
      bid_price: 0.1,
      run: 'train',
      idle_timeout_s: 300,
      relax: [],
      max_attempts: 3,
      boot_timeout_s: 600,
      deadline_s: 3600,
    };
    const plan = readStoredPlan(JSON.stringify(v1));
    expect(plan).toMatchObject({
      // A task is ready by status from version 3 on, whatever it was stored with (#37).
      ready_when: 'status',
      task: { run: 'train', maxRestarts: 0 },
      bid: { price: 0.1, stepPct: 10, onOutbid: 'rebid' },
      idle: { timeoutS: 300, gpuUtilPct: 5 },
      max_attempts: 3,
    });
  });

  it('a version 2 task stored waiting for SSH reads as ready by status; a version 2 run without a task keeps SSH', () => {
    const v2 = (extra: Record<string, unknown>) => {
      const { berth_spec_version: _v, ...stored } = JSON.parse(storedSpecText(planOf(extra))) as Record<string, unknown>;
      return JSON.stringify({ ...stored, ready_when: 'ssh', berth_spec_version: 2 });
    };
    expect(readStoredPlan(v2({ run: 'train', max_restarts: 1 }))).toMatchObject({ ready_when: 'status', task: { run: 'train' } });
    expect(readStoredPlan(v2({}))).toMatchObject({ ready_when: 'ssh', task: null });
  });

  it('a version 2 spec (before secrets, every env value scrubbed) reads with its env as secrets, so it keeps that scrubbing', () => {
    const v2 = { ...JSON.parse(storedSpecText(planOf({}))), env: { MODEL: 'llama', HF_TOKEN: 'hf_x' }, berth_spec_version: 2 };
    const plan = readStoredPlan(JSON.stringify(v2));
    expect(plan.env).toBeUndefined();
    expect(plan.secrets).toEqual({ MODEL: 'llama', HF_TOKEN: 'hf_x' });
  });

  it('what cannot be read is a StoredSpecError that says why and shows no value', () => {
    const plan = planOf({ env: { TOKEN: 'secret-value' } });
    const cases: Array<[string, RegExp]> = [
      ['{', /not valid JSON/],
      ['[]', /not an object/],
      [
        JSON.stringify({ ...JSON.parse(storedSpecText(plan)), berth_spec_version: 99 }),
        /version 99; this build of berth reads versions 1 to 4/,
      ],
      [JSON.stringify({ ...JSON.parse(storedSpecText(plan)), max_price_per_hour: 'lots' }), /\$\.max_price_per_hour/],
      [JSON.stringify({ ...base, env: { TOKEN: 'secret-value' } }), /lacks the limits filled at submission/],
    ];
    for (const [text, message] of cases) {
      let caught: unknown;
      try {
        readStoredPlan(text);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(StoredSpecError);
      expect((caught as Error).message).toMatch(message);
      expect((caught as Error).message).not.toContain('secret-value');
    }
  });
});
