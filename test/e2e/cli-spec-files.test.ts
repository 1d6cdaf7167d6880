// Job spec files as people write them (issue #41): YAML as well as JSON, every problem at its line
// and column, and overrides on the command line. The built CLI spawned as a process; no daemon is
// needed to validate, and a submit with a bad override stores nothing.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { berth, userEnv } from '../helpers/berth-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-spec-files-'));
// No service to ask for its GPU names (a closed local port): validate says they were not checked.
const env = userEnv(join(dir, 'home'), { BERTH_API_URL: 'http://127.0.0.1:9' });
const NAMES_NOT_CHECKED = /^Warning: the GPU names of \S+ were not checked: http:\/\/127\.0\.0\.1:9 could not be reached \(\w+\)\.\n$/;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

const YAML_SPEC = `# a job spec in YAML
name: yaml-job
image: pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime
disk_gb: 20
search:
  filters:
    num_gpus: { eq: 1 }
    gpu_name: { in: [RTX 4090, RTX 3090] }
max_price_per_hour: 0.8
`;

describe('job spec files in YAML and JSON', () => {
  it('validate accepts a YAML spec (exit 0)', async () => {
    const r = await berth(['validate', write('job.yaml', YAML_SPEC)], env);
    expect(r.stderr).toMatch(NAMES_NOT_CHECKED);
    expect(r.code).toBe(0);
  });

  it('names a schema problem of a YAML spec by its path, line and column (exit 2)', async () => {
    const file = write(
      'bad.yml',
      YAML_SPEC.replace('disk_gb: 20', 'disk_gb: forty').replace('num_gpus: { eq: 1 }', 'num_gpus: { eq: 1 }\n    gpu_nmae: { eq: x }'),
    );
    const r = await berth(['validate', file], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\$\.disk_gb: expected a number, got string \(line 4, column 10\)/);
    expect(r.stderr).toMatch(/\$\.search\.filters\.gpu_nmae: unknown search field; did you mean gpu_name\? \(line 8, column 15\)/);
  });

  it('names a YAML syntax error by its line and column (exit 2)', async () => {
    const r = await berth(['validate', write('broken.yaml', 'name: x\nsearch:\n  filters: [1, 2\nimage: y\n')], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\$: not valid YAML at line \d+, column \d+/);
  });

  it('names a JSON syntax error and a JSON schema problem by line and column (exit 2)', async () => {
    const syntax = await berth(['validate', write('broken.json', '{\n  "name": "x",\n  "image": "y"\n  "disk_gb": 20\n}\n')], env);
    expect(syntax.code).toBe(2);
    expect(syntax.stderr).toMatch(/\$: not valid JSON at line 4, column 3/);
    const schema = await berth(
      ['validate', write('typed.json', '{\n  "name": "x",\n  "image": "y",\n  "max_price_per_hour": "cheap"\n}\n')],
      env,
    );
    expect(schema.code).toBe(2);
    expect(schema.stderr).toMatch(/\$\.max_price_per_hour: expected a number, got string \(line 4, column 25\)/);
  });
});

describe('spec overrides on the command line (--set)', () => {
  it('an override is checked as if it were in the file: a valid one passes, a bad one is named (exit 2)', async () => {
    const file = write('over.yaml', YAML_SPEC);
    const ok = await berth(['validate', file, '--set', 'max_price_per_hour=0.5', '--set', 'search.filters.gpu_ram.gte=20'], env);
    expect(ok.stderr).toMatch(NAMES_NOT_CHECKED);
    expect(ok.code).toBe(0);
    const bad = await berth(['validate', file, '--set', 'max_price_per_hour=cheap'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/\$\.max_price_per_hour: expected a number, got string/);
  });

  it('a string field that --set gave a number says the value came from --set and how to quote it (exit 2)', async () => {
    const file = write('over3.yaml', YAML_SPEC);
    const bad = await berth(['validate', file, '--set', 'env.X=1'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(
      `$.env.X: expected a string, got number (from --set env.X=1: quote the value to keep it a string, --set 'env.X="1"')`,
    );
    expect(bad.stderr).not.toMatch(/line \d+, column/);
    const quoted = await berth(['validate', file, '--set', 'env.X="1"'], env);
    expect(quoted.code).toBe(0);
  });

  it('refuses an override that is not PATH=VALUE, or whose path runs through a value (exit 2)', async () => {
    const file = write('over2.yaml', YAML_SPEC);
    const noEq = await berth(['validate', file, '--set', 'max_price_per_hour'], env);
    expect(noEq.code).toBe(2);
    expect(noEq.stderr).toContain('expected PATH=VALUE');
    const through = await berth(['validate', file, '--set', 'disk_gb.size=3'], env);
    expect(through.code).toBe(2);
    expect(through.stderr).toContain('"disk_gb" is not an object');
    const proto = await berth(['validate', file, '--set', '__proto__.x=1'], env);
    expect(proto.code).toBe(2);
    expect(proto.stderr).toContain('is not a field path');
  });
});
