// Watching a Python task as people do (issue #50 item 1): a train.py that prints with plain
// `print()` reaches `berth submit --wait` and `berth logs --follow` line by line while it runs (its
// environment gets PYTHONUNBUFFERED=1 from the wrapper), and both commands exit with the task's own
// exit code. Order, not time, is the proof: the script waits for a file the test writes only once
// the CLI has printed the line before.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import { userEnv } from '../helpers/berth-cli.js';
import { spawnBerth } from '../helpers/spawned-berth.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();

let goDir: string | undefined;
afterEach(() => {
  if (goDir) rmSync(goDir, { recursive: true, force: true });
  goDir = undefined;
});

/** A train.py that prints an epoch, waits for go<k>, for k = 1..2, then exits with `code`. */
function trainScript(dir: string, code: number): string {
  const script = join(dir, 'train.py');
  writeFileSync(
    script,
    [
      'import os, sys, time',
      'for k in (1, 2):',
      '    print(f"epoch {k}")',
      `    while not os.path.exists(os.path.join(${JSON.stringify(dir)}, f"go{k}")):`,
      '        time.sleep(0.1)',
      'print("done")',
      `sys.exit(${code})`,
      '',
    ].join('\n'),
  );
  chmodSync(script, 0o644);
  return script;
}

async function start(code: number) {
  const { home, daemon } = await world.sshWorld({ seed: 14, onstartTimeoutS: 90, homePrefix: 'berth-py-' });
  // Where every user can reach (the simulator runs tasks unprivileged; the test's TMPDIR is private).
  goDir = mkdtempSync('/tmp/berth-py-go-');
  chmodSync(goDir, 0o755);
  const spec = jobSpec({ name: 'train-small', ready_when: 'status', max_restarts: 0, run: `python3 ${trainScript(goDir, code)}` });
  return { home, daemon, spec };
}

/** Lets the task go on past epoch k once the CLI has printed it. */
async function stepThrough(cli: ReturnType<typeof spawnBerth>): Promise<void> {
  for (const k of [1, 2]) {
    await cli.until(`epoch ${k}\n`);
    // Not yet the next: the task waits for this file.
    expect(cli.stdout).not.toContain(`epoch ${k + 1}`);
    writeFileSync(join(goDir!, `go${k}`), '');
  }
}

it("`berth submit --wait` prints a Python task's print() lines as they come, then exits with the task's exit code", async () => {
  const { home, spec } = await start(3);
  const file = join(goDir!, 'train.json');
  writeFileSync(file, JSON.stringify(spec));
  const cli = spawnBerth(['submit', file, '--wait'], userEnv(home));
  await stepThrough(cli);
  expect(await cli.exited).toBe(3);
  const lines = cli.stdout.split('\n');
  expect(lines.filter((l) => /^(epoch \d|done)$/.test(l))).toEqual(['epoch 1', 'epoch 2', 'done']);
  // Each line once: the lines followed are not printed again as "Last lines" at the end.
  expect(cli.stdout).not.toContain('Last lines of attempt');
  expect(cli.stderr).toMatch(/failed/);
}, 120_000);

it("`berth logs --follow` prints a Python task's print() lines as they come, then exits with the task's exit code", async () => {
  const { home, daemon, spec } = await start(5);
  const created = await daemon.api<RunView>('POST', '/v1/runs', spec);
  expect(created.status).toBe(201);
  const runId = created.body.id;
  const cli = spawnBerth(['logs', runId, '--follow'], userEnv(home));
  await stepThrough(cli);
  expect(await cli.exited).toBe(5);
  expect(cli.stdout).toMatch(/epoch 1\n(.*\n)*epoch 2\n(.*\n)*done\n/);
  const ended = await daemon.waitFor(runId, isEnded, 30_000);
  expect(ended.error).toMatchObject({ kind: 'task_failed', exit_code: 5 });
}, 120_000);

it('`berth logs --follow` of a task that succeeds exits 0', async () => {
  const { home, daemon, spec } = await start(0);
  const created = await daemon.api<RunView>('POST', '/v1/runs', spec);
  const cli = spawnBerth(['logs', created.body.id, '--follow'], userEnv(home));
  await stepThrough(cli);
  expect(await cli.exited).toBe(0);
  expect(cli.stdout).toContain('done\n');
}, 120_000);
