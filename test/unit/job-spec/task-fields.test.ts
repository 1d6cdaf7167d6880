import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { issuesOf } from '../../helpers/spec-issues.js';
import { SpecError } from '../../../src/errors.js';
import { MARKER_PREFIX, taskEndOf, taskExitOf, taskScript } from '../../../src/job-spec/task-script.js';
import { planRun } from '../../../src/job-spec/run-plan.js';
import { reuseKey } from '../../../src/job-spec/reuse-key.js';
import { checkJobSpecAgainstConfig, jobSpecJsonSchema, parseJobSpec, parseJobSpecText } from '../../../src/job-spec/validate.js';

const minimal = { name: 'job', image: 'ubuntu:22.04', max_price_per_hour: 0.5 };
const RUNS = {
  max_attempts: 3,
  boot_timeout_s: 60,
  deadline_s: 600,
  destroy_retry_max_delay_s: 5,
  outage_backoff_s: 1,
  gone_offers_per_search: 4,
  machine_quarantine_s: 0,
  rebid_wait_s: 30,
  idle_warning_s: 300,
  search_share_s: 30,
  relax: [],
};
const pathsOf = (input: unknown) => issuesOf(input).map((i) => i.path);

describe('task fields of the job spec', () => {
  it('accepts examples/task.json', () => {
    const spec = parseJobSpecText(readFileSync(new URL('../../../examples/task.json', import.meta.url), 'utf8'));
    expect(spec).toMatchObject({ max_restarts: 1, idle_timeout_s: 1800 });
    expect(spec.run).toMatch(/epoch/);
  });

  it('accepts a task with restarts and idle autostop', () => {
    const spec = parseJobSpec({ ...minimal, run: 'python train.py', max_restarts: 2, idle_timeout_s: 600, idle_gpu_util_pct: 10 });
    expect(spec).toMatchObject({ run: 'python train.py', max_restarts: 2, idle_timeout_s: 600, idle_gpu_util_pct: 10 });
  });

  it('refuses a negative or fractional max_restarts, naming the field', () => {
    expect(pathsOf({ ...minimal, run: 'x', max_restarts: -1 })).toEqual(['$.max_restarts']);
    expect(pathsOf({ ...minimal, run: 'x', max_restarts: 1.5 })).toEqual(['$.max_restarts']);
  });

  it('refuses max_restarts without a task, and idle_gpu_util_pct without idle_timeout_s', () => {
    expect(pathsOf({ ...minimal, max_restarts: 1 })).toEqual(['$.max_restarts']);
    expect(pathsOf({ ...minimal, idle_gpu_util_pct: 5 })).toEqual(['$.idle_gpu_util_pct']);
  });

  it('accepts keep_on_failure_s with a task, planned as 0 when absent (issue #50)', () => {
    expect(parseJobSpec({ ...minimal, run: 'x', keep_on_failure_s: 3600 })).toMatchObject({ keep_on_failure_s: 3600 });
    expect(planRun(parseJobSpec({ ...minimal, run: 'x', keep_on_failure_s: 60 }), RUNS).task).toMatchObject({ keepOnFailureS: 60 });
    expect(planRun(parseJobSpec({ ...minimal, run: 'x' }), RUNS).task).toMatchObject({ keepOnFailureS: 0 });
  });

  it('refuses keep_on_failure_s past an hour, fractional, negative, without a task, or with a cloud copy', () => {
    for (const keep of [3601, 1.5, -1]) expect(pathsOf({ ...minimal, run: 'x', keep_on_failure_s: keep })).toEqual(['$.keep_on_failure_s']);
    expect(issuesOf({ ...minimal, run: 'x', keep_on_failure_s: 3601 })[0]!.message).toMatch(/at most 3600/);
    expect(pathsOf({ ...minimal, keep_on_failure_s: 60 })).toEqual(['$.keep_on_failure_s']);
    const cloud = { paths: ['out'], cloud: { connection: 'c', path: '/b' } };
    expect(pathsOf({ ...minimal, run: 'x', keep_on_failure_s: 60, outputs: cloud })).toEqual(['$.keep_on_failure_s']);
    expect(parseJobSpec({ ...minimal, run: 'x', keep_on_failure_s: 60, outputs: ['out'] })).toMatchObject({ keep_on_failure_s: 60 });
  });

  it('accepts warm.idle_s with an on-demand task, planned as 0 when absent, and refuses it elsewhere (issue #51)', () => {
    expect(planRun(parseJobSpec({ ...minimal, run: 'x', warm: { idle_s: 600 } }), RUNS).task).toMatchObject({ warmIdleS: 600 });
    expect(planRun(parseJobSpec({ ...minimal, run: 'x' }), RUNS).task).toMatchObject({ warmIdleS: 0 });
    for (const idle of [0, 3601, 1.5]) expect(pathsOf({ ...minimal, run: 'x', warm: { idle_s: idle } })).toEqual(['$.warm.idle_s']);
    expect(issuesOf({ ...minimal, run: 'x', warm: { idle_s: 3601 } })[0]!.message).toMatch(/at most 3600/);
    expect(pathsOf({ ...minimal, run: 'x', warm: { idle_s: 60, extra: 1 } })).toEqual(['$.warm.extra']);
    expect(pathsOf({ ...minimal, warm: { idle_s: 60 } })).toEqual(['$.warm']);
    expect(pathsOf({ ...minimal, run: 'x', warm: { idle_s: 60 }, search: { type: 'bid' }, bid_price: 0.1 })).toEqual(['$.warm']);
    const cloud = { paths: ['out'], cloud: { connection: 'c', path: '/b' } };
    expect(pathsOf({ ...minimal, run: 'x', warm: { idle_s: 60 }, outputs: cloud })).toEqual(['$.warm']);
  });

  it('accepts a workdir with its destination, and refuses workdir without run, workdir_dest or workdir_sha256 without workdir (issue #40)', () => {
    const sha = 'a'.repeat(64);
    expect(
      parseJobSpec({ ...minimal, run: 'python3 train.py', workdir: './code', workdir_dest: '/srv/app', workdir_sha256: sha }),
    ).toMatchObject({
      workdir: './code',
      workdir_dest: '/srv/app',
    });
    expect(pathsOf({ ...minimal, workdir: './code' })).toEqual(['$.workdir']);
    expect(pathsOf({ ...minimal, run: 'x', workdir_dest: '/srv/app' })).toEqual(['$.workdir_dest']);
    expect(pathsOf({ ...minimal, run: 'x', workdir_sha256: sha })).toEqual(['$.workdir_sha256']);
    expect(issuesOf({ ...minimal, workdir: './code' })[0]!.message).toMatch(/only applies with run/);
  });

  it('refuses a workdir_dest that is not a plain absolute directory, and a workdir_sha256 that is not one', () => {
    for (const dest of ['relative/dir', '/', '/a/../etc', '/with space', "/q'uote", '/$(x)'])
      expect(pathsOf({ ...minimal, run: 'x', workdir: '.', workdir_dest: dest }), dest).toEqual(['$.workdir_dest']);
    expect(pathsOf({ ...minimal, run: 'x', workdir: '.', workdir_sha256: 'ABC' })).toEqual(['$.workdir_sha256']);
    expect(pathsOf({ ...minimal, run: 'x', workdir: '' })).toEqual(['$.workdir']);
  });

  it('refuses idle_gpu_util_pct outside 0-100', () => {
    expect(pathsOf({ ...minimal, idle_timeout_s: 600, idle_gpu_util_pct: 101 })).toEqual(['$.idle_gpu_util_pct']);
    expect(pathsOf({ ...minimal, idle_timeout_s: 600, idle_gpu_util_pct: -1 })).toEqual(['$.idle_gpu_util_pct']);
  });

  it('refuses an empty run and one the create limits cannot carry', () => {
    expect(pathsOf({ ...minimal, run: '  ' })).toEqual(['$.run']);
    // Random text does not compress: 4 KB of it cannot fit the 4048-character onstart.
    const issues = issuesOf({ ...minimal, run: randomBytes(3000).toString('base64') });
    expect(issues.map((i) => i.path)).toEqual(['$.run']);
    expect(issues[0]!.message).toMatch(/4048-character onstart limit/);
  });

  it('refuses an idle timeout shorter than two poll intervals at submit', () => {
    const spec = parseJobSpec({ ...minimal, idle_timeout_s: 15 });
    try {
      checkJobSpecAgainstConfig(spec, { polling: { interval_s: 10 } });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(SpecError);
      expect((err as SpecError).issues[0]!.path).toBe('$.idle_timeout_s');
    }
    expect(() =>
      checkJobSpecAgainstConfig(parseJobSpec({ ...minimal, idle_timeout_s: 20 }), { polling: { interval_s: 10 } }),
    ).not.toThrow();
  });

  it('publishes the new fields in the JSON Schema', () => {
    const props = (jobSpecJsonSchema() as { properties: Record<string, unknown> }).properties;
    for (const f of ['run', 'max_restarts', 'keep_on_failure_s', 'idle_timeout_s', 'idle_gpu_util_pct']) expect(props).toHaveProperty(f);
  });
});

describe('the task wrapper', () => {
  const script = taskScript({
    run: "echo 'hi'; exit 3",
    runId: 'abcdefgh2345',
    n: 2,
    serviceUrl: 'http://127.0.0.1:1/',
    backstop: { atS: 1_000_060, madeAtS: 1_000_000 },
  });

  it('runs the command quoted, writes the end marker and stops its own instance', () => {
    // The task's shell writes its pid, then execs the command, quoted as one word (#48, #49).
    expect(script).toContain(`exec sh -c "$2"' berth "$berth_f.pid" 'echo '\\''hi'\\''; exit 3' </dev/null 2>&1`);
    expect(script).toContain(MARKER_PREFIX);
    // The script ends with the end: marker to the done-file and the log, then the self-stop.
    expect(script).toMatch(/berth_end "berth-task-end run=abcdefgh2345 attempt=2 exit=\$berth_rc"\n$/);
    expect(script).toMatch(/berth_end\(\) \{.*printf.*; berth_self stop; \}/);
    expect(script).toContain('( berth_w=$(( 1000060 - $(date +%s 2>/dev/null || echo 1000000) ));');
  });

  it('reads the exit code of its own run and attempt only', () => {
    const log = 'x\nberth-task-end run=abcdefgh2345 attempt=1 exit=0\nberth-task-end run=abcdefgh2345 attempt=2 exit=3\n';
    expect(taskExitOf(log, 'abcdefgh2345', 2)).toBe(3);
    expect(taskExitOf(log, 'abcdefgh2345', 1)).toBe(0);
    expect(taskExitOf(log, 'abcdefgh2345', 3)).toBeNull();
    expect(taskExitOf('echo berth-task-end run=abcdefgh2345 attempt=2 exit=0', 'abcdefgh2345', 2)).toBeNull();
  });

  it("an attempt's last marker wins: a container started again may print another after the first (#37)", () => {
    // A wrapper from before the done-file ran the task again at the next container start, and a
    // marker is final only as the last of its attempt; scanning from the first line would say 0.
    const log = [
      'epoch 1',
      'berth-task-end run=abcdefgh2345 attempt=2 exit=0',
      'Container C.42 restarting',
      'epoch 1 again',
      'berth-task-end run=abcdefgh2345 attempt=2 exit=3',
      'sshd[1]: Connection closed by 10.0.0.1',
    ].join('\n');
    expect(taskEndOf(log, 'abcdefgh2345', 2)).toEqual({ exitCode: 3, onstart: false });
    const onstartLast = `${log}\nberth-task-end run=abcdefgh2345 attempt=2 exit=1 stage=onstart\n`;
    expect(taskEndOf(onstartLast, 'abcdefgh2345', 2)).toEqual({ exitCode: 1, onstart: true });
  });
});

describe('the reuse key (issue #51)', () => {
  const spec = (over: Record<string, unknown> = {}) =>
    parseJobSpec({ ...minimal, run: 'x', env: { A: '1' }, secrets: { T: 's' }, ...over });
  it('is the same for the same container whatever the order, the price cap or the task, and differs for any part of the container', () => {
    const key = reuseKey(spec());
    expect(reuseKey(spec({ run: 'other', max_price_per_hour: 2, name: 'n2' }))).toBe(key);
    expect(reuseKey(parseJobSpec({ secrets: { T: 's' }, env: { A: '1' }, run: 'y', ...minimal }))).toBe(key);
    for (const other of [
      { image: 'ubuntu:24.04' },
      { disk_gb: 50 },
      { onstart: 'pip install x' },
      { env: { A: '2' } },
      { secrets: { T: 'other' } },
      { search: { filters: { num_gpus: { eq: 2 } } } },
    ])
      expect(reuseKey(spec(other))).not.toBe(key);
    expect(key).not.toContain('s"');
  });
});
