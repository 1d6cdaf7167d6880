// CI reads the test run's exit code: a failing test must make `vitest run` exit non-zero with the
// suite's own configuration. (A dependency's exit hook once turned it into 0: test/helpers/pg-server.ts.)
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packagePath } from '../../src/package-path.js';

describe('the test run', () => {
  it('exits non-zero when a test fails, with the suite global setup (the test Postgres) in place', () => {
    const vitest = packagePath('node_modules', 'vitest', 'vitest.mjs');
    const run = spawnSync(process.execPath, [vitest, 'run', '--config', 'test/helpers/exit-probe/vitest.config.ts'], {
      cwd: packagePath(),
      // The system's temp dir, not this file's private one: the test Postgres runs as another user.
      env: { ...process.env, CI: 'true', TMPDIR: dirname(tmpdir()) },
      encoding: 'utf8',
      timeout: 90_000,
    });
    expect(run.stdout + run.stderr).toMatch(/1 failed/);
    expect(run.status).toBe(1);
  }, 120_000);
});
