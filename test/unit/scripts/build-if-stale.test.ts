// `npm run demo` runs scripts/build-if-stale.mjs: right after `npm install` (whose `prepare` built
// dist/) it must not build again, and after a source changes it must. Run here on a copy of the
// script in a temp tree whose `npm run build` only writes a marker, with file times set by hand.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'scripts', 'build-if-stale.mjs');
let root: string;

function file(path: string, at: number) {
  const full = join(root, path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, '');
  utimesSync(full, at, at);
}

function run() {
  const result = spawnSync(process.execPath, [join(root, 'scripts', 'build-if-stale.mjs')], { cwd: root, encoding: 'utf8' });
  return { status: result.status, stderr: result.stderr, built: existsSync(join(root, 'built')) };
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'build-if-stale-'));
  mkdirSync(join(root, 'scripts'));
  copyFileSync(script, join(root, 'scripts', 'build-if-stale.mjs'));
  writeFileSync(
    join(root, 'package.json'),
    JSON.stringify({ name: 'x', scripts: { build: "node -e \"require('fs').writeFileSync('built', '')\"" } }),
  );
  const before = Date.now() / 1000 - 100;
  for (const source of ['src/cli/main.ts', 'src/ui/app.css', 'machines/run.ts', 'bench/main.ts', 'tsconfig.json', 'package-lock.json']) {
    file(source, before);
  }
  for (const output of ['dist/src/cli/main.js', 'dist/ui/app.js', 'dist/ui/index.html']) file(output, before + 50);
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('build-if-stale (npm run demo)', () => {
  it('does not build when every output is newer than every source, and says so', () => {
    const { status, stderr, built } = run();
    expect(status).toBe(0);
    expect(built).toBe(false);
    expect(stderr).toContain('no build needed');
  });

  it('builds when a source changed after the last build', () => {
    file('src/ui/app.css', Date.now() / 1000);
    expect(run()).toMatchObject({ status: 0, built: true });
  });

  it('builds when an output is missing', () => {
    rmSync(join(root, 'dist', 'ui', 'app.js'));
    expect(run()).toMatchObject({ status: 0, built: true });
  });

  it('does not count the benchmark results as sources', () => {
    file('bench/results/latest.md', Date.now() / 1000);
    expect(run()).toMatchObject({ status: 0, built: false });
  });
});
