// Runs `npm run build` only when dist/ is older than what it is built from, so that `npm run demo`
// right after `npm install` (whose `prepare` has just built) starts at once instead of compiling
// for half a minute again. Stale means: an output is missing, or a file that tsc or
// scripts/build-ui.mjs reads (sources, tsconfigs, the build script, the lockfile) changed after the
// oldest of the outputs was written. `npm run build` always builds.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Newest modification time (ms) of the files under `path` (a file: its own); 0 when absent. */
function newest(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.mtimeMs;
  let max = 0;
  for (const entry of readdirSync(path)) {
    if (entry === 'results' || entry === 'node_modules') continue; // bench/results/ is the benchmark's output
    max = Math.max(max, newest(join(path, entry)));
  }
  return max;
}

/** The time the last build finished writing, or 0 when one of its outputs is missing. */
function builtAt() {
  const outputs = [join('dist', 'src', 'cli', 'main.js'), join('dist', 'ui', 'app.js'), join('dist', 'ui', 'index.html')];
  let oldest = Infinity;
  for (const output of outputs) {
    try {
      oldest = Math.min(oldest, statSync(join(root, output)).mtimeMs);
    } catch {
      return 0;
    }
  }
  return oldest;
}

const inputs = ['src', 'machines', 'bench', 'scripts/build-ui.mjs', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];

function isStale() {
  const built = builtAt();
  if (built === 0) return true;
  return inputs.some((input) => newest(join(root, input)) > built);
}

if (isStale()) {
  const result = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  process.exit(result.status ?? 1);
} else {
  process.stderr.write('dist/ is up to date with the sources: no build needed (npm run build forces one).\n');
}
