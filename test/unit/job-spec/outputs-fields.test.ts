// The job spec's `outputs` (issue #40): a list of container paths or {paths, cloud}; it needs a task;
// a cloud copy takes exactly one path; relative paths resolve against the task's directory.
import { describe, expect, it } from 'vitest';
import { issuesOf } from '../../helpers/spec-issues.js';
import { planRun } from '../../../src/job-spec/run-plan.js';
import { parseJobSpec } from '../../../src/job-spec/validate.js';
import { loadConfig } from '../../../src/config/load.js';

const task = { name: 'job', image: 'ubuntu:22.04', max_price_per_hour: 0.5, run: 'python3 train.py' };
const pathsOf = (input: unknown) => issuesOf(input).map((i) => `${i.path}: ${i.message}`);
const runs = loadConfig({}, {}).config.runs;

describe('outputs in the job spec', () => {
  it('takes a list of paths, relative ones resolved against /root/workdir', () => {
    const plan = planRun(parseJobSpec({ ...task, outputs: ['out/model.bin', '/data/logs/', 'x'] }), runs);
    expect(plan.collect).toEqual({ paths: ['/root/workdir/out/model.bin', '/data/logs', '/root/workdir/x'], cloud: null });
  });

  it('takes the long form with a cloud connection by name or id', () => {
    const plan = planRun(parseJobSpec({ ...task, outputs: { paths: ['out/'], cloud: { connection: 7, path: 'bucket/run' } } }), runs);
    expect(plan.collect).toEqual({ paths: ['/root/workdir/out'], cloud: { connection: 7, path: 'bucket/run' } });
    expect(planRun(parseJobSpec(task), runs).collect).toBeNull();
  });

  it('refuses outputs without run, naming the field', () => {
    const { run: _run, ...noTask } = task;
    expect(pathsOf({ ...noTask, outputs: ['out'] })).toEqual(['$.outputs: only applies with run (a task leaves outputs)']);
  });

  it('refuses "..", an empty list, and a cloud copy of more than one path', () => {
    expect(pathsOf({ ...task, outputs: ['../etc/passwd'] })).toEqual(['$.outputs[0]: must not contain ".." (name the path itself)']);
    expect(pathsOf({ ...task, outputs: [] })[0]).toMatch(/^\$\.outputs/);
    expect(pathsOf({ ...task, outputs: { paths: ['a', 'b'], cloud: { connection: 'c', path: 'p' } } })).toEqual([
      '$.outputs.paths: must name exactly one path with cloud (one cloud copy per run)',
    ]);
  });

  it('refuses two paths kept under one name, or one folder inside the other, naming the field (issue #48)', () => {
    expect(pathsOf({ ...task, outputs: ['res/', '/res/'] })).toEqual([
      '$.outputs[1]: would be kept as "res", where outputs[0] ("res/") keeps its files too (one name for two files, or one folder inside the other): drop one of the two paths',
    ]);
    expect(pathsOf({ ...task, outputs: ['out', '/root/workdir/out/model.bin'] })).toEqual([
      '$.outputs[1]: would be kept as "out/model.bin", where outputs[0] ("out") keeps its files too (one name for two files, or one folder inside the other): drop one of the two paths',
    ]);
    expect(pathsOf({ ...task, outputs: { paths: ['./a', 'a'], cloud: undefined } })[0]).toMatch(
      /^\$\.outputs\.paths\[1\]: would be kept as "a"/,
    );
    expect(() => parseJobSpec({ ...task, outputs: ['out', 'outer', '/out2', 'res/a', '/res/b'] })).not.toThrow();
  });
});
