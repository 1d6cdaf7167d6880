// What the CLI loads to start: `berth --version` and the client commands must not pull in the
// daemon, the simulator or the heavy libraries (npm run bench, section cli, measures the time).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packagePath } from '../../src/package-path.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-startup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The modules `berth ...args` resolved, as paths inside the package (node_modules by package name). */
let traces = 0;
function loaded(args: string[]): string[] {
  const trace = join(dir, `trace-${++traces}.txt`);
  spawnSync(process.execPath, ['--import', packagePath('test', 'helpers', 'module-trace.mjs'), packagePath('bin', 'berth.js'), ...args], {
    env: { ...process.env, MODULE_TRACE: trace, BERTH_HOME: join(dir, 'home') },
    stdio: 'ignore',
  });
  return readFileSync(trace, 'utf8')
    .split('\n')
    .filter((u) => u.startsWith('file:'))
    .map((u) => {
      const path = decodeURIComponent(new URL(u).pathname);
      const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
      return nm ? `npm:${nm[1]}` : path.slice(packagePath().length + 1);
    });
}

const HEAVY = ['npm:zod', 'npm:undici', 'npm:pino', 'npm:xstate', 'npm:better-sqlite3', 'npm:bottleneck', 'npm:p-retry'];

describe('CLI start-up', () => {
  it.each([[['--version']], [['status']], [['status', 'somerun', '--json']], [['cancel', 'somerun']], [['events', 'somerun']]])(
    'berth %j loads no daemon, simulator, job-spec or heavy library code',
    (args) => {
      const mods = loaded(args);
      expect(mods).toContain('dist/src/cli/main.js');
      expect(mods.filter((m) => HEAVY.includes(m))).toEqual([]);
      expect(
        mods.filter((m) => /dist\/(src\/(daemon\/|sim\/|store\/|client\/|job-spec\/|config\/(load|schema))|machines\/)/.test(m)),
      ).toEqual([]);
    },
  );

  it('berth validate loads the job spec code it needs (the trace sees what is loaded)', () => {
    expect(loaded(['validate', join(dir, 'none.json')])).toContain('npm:zod');
  });
});
