import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { issuesOf } from '../../helpers/spec-issues.js';
import { loadConfig } from '../../../src/config/load.js';
import { SpecError } from '../../../src/errors.js';
import { JOB_SPEC_DEFAULTS } from '../../../src/job-spec/schema.js';
import { jobSpecJsonSchema, parseJobSpec, parseJobSpecText } from '../../../src/job-spec/validate.js';
import { planRun } from '../../../src/job-spec/run-plan.js';

const example = (name: string) => readFileSync(new URL(`../../../examples/${name}`, import.meta.url), 'utf8');

const minimal = { name: 'job', image: 'ubuntu:22.04', max_price_per_hour: 0.5 };

describe('parseJobSpec', () => {
  it.each(['job.json', 'demo-job.json', 'impossible-job.json'])('accepts examples/%s', (file) => {
    const spec = parseJobSpecText(example(file));
    expect(spec.image).toMatch(/pytorch/);
  });

  it('keeps the SPEC example as written', () => {
    const spec = parseJobSpecText(example('job.json'));
    expect(spec.search.filters['gpu_name']).toEqual({ eq: 'RTX 4090' });
    expect(spec.relax).toEqual([{ drop: ['verified'] }, { set: { gpu_name: { in: ['RTX 4090', 'RTX 3090', 'RTX A6000'] } } }]);
    expect(spec.max_price_per_hour).toBe(0.9);
  });

  it('fills the spec-level defaults of a minimal spec', () => {
    const spec = parseJobSpec(minimal);
    expect(spec.disk_gb).toBe(JOB_SPEC_DEFAULTS.disk_gb);
    expect(spec.search).toEqual({
      filters: {},
      order: [['dlperf_per_dphtotal', 'desc']],
      type: 'on-demand',
      limit: 64,
    });
    expect(spec.relax).toBeUndefined();
  });

  it('reports every problem at once, each with its JSON path', () => {
    const issues = issuesOf({
      name: 'llm finetune',
      disk_gb: '40',
      dsik_gb: 40,
      env: { WANDB_PROJECT: 'demo', '1BAD': 'x', COUNT: 3 },
      search: {
        filters: { gpu_ram: { gte: '24000' }, gpu_name: { like: 'RTX%' }, num_gpus: {} },
        type: 'spot',
        limt: 10,
      },
      max_price_per_hour: 0,
      max_attempts: 1.5,
    });
    expect(issues).toEqual([
      { path: '$.name', message: expect.stringMatching(/letters, digits/) },
      { path: '$.image', message: 'missing (expected a string)' },
      { path: '$.disk_gb', message: 'expected a number, got string' },
      { path: '$.env["1BAD"]', message: expect.stringMatching(/environment variable name/) },
      { path: '$.env.COUNT', message: 'expected a string, got number' },
      { path: '$.search.filters.gpu_name.like', message: expect.stringMatching(/^unknown operator "like"/) },
      { path: '$.search.filters.num_gpus', message: expect.stringMatching(/^needs an operator/) },
      { path: '$.search.filters.gpu_ram.gte', message: 'expected a number (MB) or a figure in GB such as "16GB", got "24000"' },
      { path: '$.search.type', message: 'expected one of "on-demand", "bid", got "spot"' },
      { path: '$.search.limt', message: 'unknown field "limt"' },
      { path: '$.max_price_per_hour', message: 'must be greater than 0' },
      { path: '$.max_attempts', message: 'expected an integer, got number' },
      { path: '$.dsik_gb', message: 'unknown field "dsik_gb"' },
    ]);
  });

  it('names each unknown top-level field in its own issue', () => {
    expect(issuesOf({ ...minimal, imgae: 'x', gpu: 'RTX 4090' })).toEqual([
      { path: '$.imgae', message: 'unknown field "imgae"' },
      { path: '$.gpu', message: 'unknown field "gpu"' },
    ]);
  });

  it('requires a price cap', () => {
    expect(issuesOf({ name: 'job', image: 'ubuntu:22.04' })).toEqual([
      { path: '$.max_price_per_hour', message: 'missing (expected a number)' },
    ]);
  });

  it('rejects a root that is not an object, and JSON syntax errors, at $', () => {
    expect(issuesOf([])).toEqual([{ path: '$', message: 'expected an object, got array' }]);
    expect(() => parseJobSpecText('{"name": ')).toThrow(SpecError);
    try {
      parseJobSpecText('{"name": ');
    } catch (err) {
      expect((err as SpecError).issues).toEqual([{ path: '$', message: expect.stringMatching(/^not valid JSON: /) }]);
    }
  });

  it('ties bid_price to bid searches', () => {
    expect(issuesOf({ ...minimal, search: { type: 'bid' } })).toEqual([
      { path: '$.bid_price', message: 'required when search.type is "bid"' },
    ]);
    expect(issuesOf({ ...minimal, bid_price: 0.2 })).toEqual([{ path: '$.bid_price', message: 'only applies when search.type is "bid"' }]);
    expect(issuesOf({ ...minimal, search: { type: 'bid' }, bid_price: 0.6 })).toEqual([
      { path: '$.bid_price', message: 'must not exceed max_price_per_hour' },
    ]);
    expect(parseJobSpec({ ...minimal, search: { type: 'bid' }, bid_price: 0.3 }).bid_price).toBe(0.3);
  });

  it('takes "min" as a bid, with a step and an outbid policy, for bid searches only', () => {
    const bid = { ...minimal, search: { type: 'bid' } };
    const spec = parseJobSpec({ ...bid, bid_price: 'min', bid_step_pct: 25, on_outbid: 'on_demand' });
    expect(spec).toMatchObject({ bid_price: 'min', bid_step_pct: 25, on_outbid: 'on_demand' });
    expect(issuesOf({ ...bid, bid_price: 'max', bid_step_pct: 0, on_outbid: 'wait' })).toEqual([
      { path: '$.bid_price', message: 'expected a number ($/h) or "min", got string' },
      { path: '$.bid_step_pct', message: 'must be greater than 0' },
      { path: '$.on_outbid', message: 'expected one of "rebid", "failover", "on_demand", got "wait"' },
    ]);
    expect(issuesOf({ ...minimal, bid_step_pct: 10, on_outbid: 'rebid' })).toEqual([
      { path: '$.bid_step_pct', message: 'only applies when search.type is "bid"' },
      { path: '$.on_outbid', message: 'only applies when search.type is "bid"' },
    ]);
  });

  it('ready_when is "ssh" or "status"; left out, the run plan decides (run-plan.test.ts)', () => {
    expect(parseJobSpec(minimal).ready_when).toBeUndefined();
    expect(parseJobSpec({ ...minimal, ready_when: 'status' }).ready_when).toBe('status');
    expect(issuesOf({ ...minimal, ready_when: 'ping' })).toEqual([
      { path: '$.ready_when', message: 'expected one of "ssh", "status", got "ping"' },
    ]);
  });

  it('refuses ready_when "ssh" on a task (a task needs no way in: SSH must never destroy one that works, #37)', () => {
    expect(parseJobSpec({ ...minimal, run: 'train', ready_when: 'status' }).ready_when).toBe('status');
    expect(parseJobSpec({ ...minimal, ready_when: 'ssh' }).ready_when).toBe('ssh');
    expect(issuesOf({ ...minimal, run: 'train', ready_when: 'ssh' })).toEqual([
      {
        path: '$.ready_when',
        message: 'a task is ready when the service lists its instance running ("status"); "ssh" applies only to runs without run',
      },
    ]);
  });

  it('checks the bid rule even when other fields are wrong', () => {
    expect(issuesOf({ ...minimal, disk_gb: -1, search: { type: 'bid' } }).map((i) => i.path)).toEqual(['$.disk_gb', '$.bid_price']);
  });

  it('refuses relax steps that would touch the price cap or the SSH port', () => {
    const issues = issuesOf({
      ...minimal,
      relax: [
        { drop: ['verified', 'direct_port_count'] },
        { drop: ['dph_total'] },
        { set: { dph_base: { lte: 2 } } },
        { set: { direct_port_count: { gte: 0 } } },
        { set: { direct_port_count: { gte: 1 } } },
        {},
      ],
    });
    expect(issues.map((i) => i.path)).toEqual([
      '$.relax[0].drop[1]',
      '$.relax[1].drop[0]',
      '$.relax[2].set.dph_base',
      '$.relax[3].set.direct_port_count',
      '$.relax[5]',
    ]);
    expect(issues[0]!.message).toMatch(/never relaxed/);
    expect(issues[3]!.message).toMatch(/1 or more/);
  });

  it('refuses a dph_total filter: the cap is max_price_per_hour', () => {
    expect(issuesOf({ ...minimal, search: { filters: { dph_total: { lte: 2 } } } })).toEqual([
      { path: '$.search.filters.dph_total', message: expect.stringMatching(/max_price_per_hour/) },
    ]);
  });

  it('refuses an onstart script too large even when compressed', () => {
    // Random hex barely compresses: 20,000 characters stay far above the limit once encoded.
    let script = '';
    while (script.length < 20_000) script += Math.random().toString(16).slice(2);
    expect(issuesOf({ ...minimal, onstart: `echo ${script}` })).toEqual([
      { path: '$.onstart', message: expect.stringMatching(/too large/) },
    ]);
  });
});

describe('resolveJobSpec', () => {
  const { runs } = loadConfig({}, {}).config;

  it('fills omitted limits and the relax ladder from config.runs', () => {
    const resolved = planRun(parseJobSpec(minimal), runs);
    expect(resolved).toMatchObject({
      max_attempts: runs.max_attempts,
      boot_timeout_s: runs.boot_timeout_s,
      deadline_s: runs.deadline_s,
      relax: runs.relax,
    });
  });

  it("keeps the spec's own limits and ladder", () => {
    const resolved = planRun(parseJobSpecText(example('demo-job.json')), runs);
    expect(resolved).toMatchObject({ max_attempts: 8, boot_timeout_s: 120, deadline_s: 1800, relax: [{ drop: ['verified'] }] });
  });

  it('keeps an explicitly empty ladder empty', () => {
    expect(planRun(parseJobSpec({ ...minimal, relax: [] }), runs).relax).toEqual([]);
  });

  it('takes max_runtime_s from runs.max_runtime_s when the spec has none, and leaves both money limits out when neither is set', () => {
    const none = planRun(parseJobSpec(minimal), runs);
    expect('max_runtime_s' in none || 'budget_usd' in none).toBe(false);
    expect(planRun(parseJobSpec(minimal), { ...runs, max_runtime_s: 3600 }).max_runtime_s).toBe(3600);
    expect(planRun(parseJobSpec({ ...minimal, max_runtime_s: 60, budget_usd: 2.5 }), { ...runs, max_runtime_s: 3600 })).toMatchObject({
      max_runtime_s: 60,
      budget_usd: 2.5,
    });
  });
});

describe('money limits', () => {
  it('refuses a runtime or budget that is not a positive number, naming each', () => {
    const issues = issuesOf({ ...minimal, max_runtime_s: 0, budget_usd: -1 });
    expect(issues.map((i) => i.path).sort()).toEqual(['$.budget_usd', '$.max_runtime_s']);
    expect(issuesOf({ ...minimal, max_runtime_s: 366 * 86_400 }).map((i) => i.path)).toEqual(['$.max_runtime_s']);
    expect(issuesOf({ ...minimal, budget_usd: '5' }).map((i) => i.path)).toEqual(['$.budget_usd']);
  });
});

describe('jobSpecJsonSchema', () => {
  it('describes every field, strictly, with the price cap required', () => {
    const schema = jobSpecJsonSchema() as {
      properties: Record<string, { properties?: Record<string, unknown>; additionalProperties?: unknown }>;
      required: string[];
      additionalProperties: unknown;
    };
    expect(Object.keys(schema.properties).sort()).toEqual(
      [
        'bid_price',
        'bid_step_pct',
        'boot_timeout_s',
        'budget_usd',
        'deadline_s',
        'disk_gb',
        'env',
        'image',
        'keep_on_failure_s',
        'max_attempts',
        'max_price_per_hour',
        'max_runtime_s',
        'name',
        'on_outbid',
        'onstart',
        'outputs',
        'ready_when',
        'relax',
        'search',
        'secrets',
        'warm',
        'run',
        'max_restarts',
        'idle_timeout_s',
        'idle_gpu_util_pct',
        'workdir',
        'workdir_dest',
        'workdir_sha256',
      ].sort(),
    );
    expect(schema.required.sort()).toEqual(['image', 'max_price_per_hour', 'name']);
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(schema.properties['search']!.properties!)).toEqual(['filters', 'order', 'type', 'limit']);
    expect(schema.properties['search']!.additionalProperties).toBe(false);
  });
});
