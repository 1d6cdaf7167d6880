// The command that stops a task before its outputs are taken (issue #48), run for real by dash on a
// real process tree started as the task wrapper starts one (its pid written, then the task exec'd):
// TERM reaches the task and the processes below it, a task that catches it writes its checkpoint,
// and one that ignores it is killed after the grace.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { taskStopCommand } from '../../../src/daemon/task-end/task-stop.js';

const RUN = 'abcdefgh2345';
let tmp: string;
let task: ChildProcess | undefined;

beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'berth-stop-'));
});
afterEach(() => {
  if (task?.pid !== undefined) {
    try {
      process.kill(-task.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

const pidFile = () => join(tmp, `berth-task-${RUN}-1.pid`);

/** Starts `run` as the wrapper's berth_run does: the pid to `.pid`, then `sh -c RUN` exec'd in its place. */
async function startTask(run: string): Promise<number> {
  task = spawn('/usr/bin/dash', ['-c', `sh -c '{ echo "$$" >"$1"; } 2>/dev/null; exec sh -c "$2"' berth "$0" "$1"`, pidFile(), run], {
    env: { PATH: '/usr/bin:/bin', TMPDIR: tmp },
    detached: true,
    stdio: 'ignore',
  });
  for (let i = 0; i < 200 && !existsSync(join(tmp, 'started')); i++) await new Promise((r) => setTimeout(r, 25));
  expect(existsSync(join(tmp, 'started'))).toBe(true);
  return Number(readFileSync(pidFile(), 'utf8').trim());
}

function stop(graceS: number): number | null {
  return spawnSync('/usr/bin/dash', ['-c', taskStopCommand(RUN, 1, graceS)], { env: { PATH: '/usr/bin:/bin', TMPDIR: tmp } }).status;
}

const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/\) [ZX]/.test(stat);
  } catch {
    return false;
  }
};

it('sends TERM to the task and its children; a task that catches it writes its checkpoint and ends', async () => {
  const child = join(tmp, 'child.pid');
  const pid = await startTask(
    `trap 'echo saved > "$TMPDIR/ckpt"; exit 143' TERM; sleep 300 & echo $! > ${child}; : > "$TMPDIR/started"; wait; wait`,
  );
  const sleeper = Number(readFileSync(child, 'utf8').trim());
  expect(alive(sleeper)).toBe(true);
  expect(stop(10)).toBe(0);
  expect(readFileSync(join(tmp, 'ckpt'), 'utf8')).toBe('saved\n');
  expect(alive(pid)).toBe(false);
  expect(alive(sleeper)).toBe(false);
});

it('kills a task that ignores TERM once the grace has passed', async () => {
  const pid = await startTask(`trap '' TERM; : > "$TMPDIR/started"; while :; do sleep 1; done`);
  expect(stop(1)).toBe(0);
  expect(alive(pid)).toBe(false);
});

it('does nothing to a task that has ended (its done-file is there), and says when no pid was left', async () => {
  expect(stop(1)).toBe(3);
  const pid = await startTask(`: > "$TMPDIR/started"; sleep 300`);
  writeFileSync(join(tmp, `berth-task-${RUN}-1.done`), 'berth-task-end\n');
  expect(stop(1)).toBe(0);
  expect(alive(pid)).toBe(true);
});
