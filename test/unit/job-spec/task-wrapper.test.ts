// The task wrapper run for real by dash and bash (issue #29): the user's onstart cannot break it,
// the marker is written whatever the onstart does, and the self-stop reaches a local stand-in for
// the service. Images without curl and wget are played by a PATH that holds neither.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { taskEndOf, taskScript, WORKDIR_READY_FILE } from '../../../src/job-spec/task-script.js';
import { HTTP_CLIENTS, pathWithout } from '../../../src/sim/container-path.js';

const RUN = 'abcdefgh2345';
let server: Server;
let url: string;
const calls: Array<{ method: string; path: string; body: string }> = [];
/** Whether the .ack file `watchedAck` was there, acked (a plain file), at each call, while a test watches one. */
const ackAtStop: boolean[] = [];
let watchedAck: string | undefined;
let scratch: string;
/** A bin dir with the shell tools of a slim image but no curl and no wget. */
let slimBin: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      calls.push({ method: req.method!, path: req.url!, body });
      if (watchedAck !== undefined) ackAtStop.push(existsSync(watchedAck) && statSync(watchedAck).isFile());
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address() as { port: number };
  url = `http://127.0.0.1:${addr.port}`;
  scratch = mkdtempSync(join(tmpdir(), 'berth-wrapper-'));
  slimBin = pathWithout(scratch, '/usr/local/bin:/usr/bin:/bin', HTTP_CLIENTS);
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(scratch, { recursive: true, force: true });
});

/** Runs the wrapper as the service would (the shell given), returns its output and exit code. */
function runWrapper(
  script: string,
  opts: {
    shell?: 'sh' | 'bash';
    path?: string;
    timeoutMs?: number;
    tmp?: string;
    onOut?: (out: string) => void;
    /** The container's environment besides the service's own (the spec's env, the image's ENV). */
    env?: Record<string, string>;
  } = {},
): Promise<{ out: string; code: number | null }> {
  // The container's temp directory, where the done-file goes: a fresh one per container unless a
  // test starts the same container again.
  const tmp = opts.tmp ?? mkdtempSync(join(scratch, 'tmp-'));
  return new Promise((resolve) => {
    const child = spawn(opts.shell === 'bash' ? '/usr/bin/bash' : '/usr/bin/dash', ['-c', script], {
      cwd: scratch,
      env: {
        PATH: opts.path ?? '/usr/local/bin:/usr/bin:/bin',
        CONTAINER_API_KEY: 'k',
        CONTAINER_ID: '42',
        HOME: scratch,
        TMPDIR: tmp,
        ...opts.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      opts.onOut?.(out);
    });
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), opts.timeoutMs ?? 10_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ out, code });
    });
  });
}

const wrapper = (onstart: string | undefined, run: string, n = 1) =>
  taskScript({ onstart, run, runId: RUN, n, serviceUrl: url, backstop: null });

describe('the task wrapper under a real shell', () => {
  it.each(['sh', 'bash'] as const)(
    '%s: a task that fails under an onstart with set -e still writes its marker and stops',
    async (shell) => {
      calls.length = 0;
      const { out } = await runWrapper(wrapper('set -e\necho setup', 'echo working; exit 3'), { shell });
      expect(out).toContain('setup\nworking\n');
      expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 3, onstart: false });
      expect(calls).toEqual([{ method: 'PUT', path: '/api/v0/instances/42/', body: '{"state":"stopped"}' }]);
    },
  );

  // keep_on_failure_s (issue #50): a stopped instance has no sshd, so a failure leaves it running and
  // the container destroys it itself once the keep has passed; a success stops as ever.
  it.each(['sh', 'bash'] as const)(
    '%s: with keep_on_failure_s a failed task is not stopped but destroyed after the keep',
    async (shell) => {
      calls.length = 0;
      const script = taskScript({ run: 'exit 3', runId: RUN, n: 1, serviceUrl: url, backstop: null, keepOnFailureS: 1 });
      let callsAtMarker: number | undefined;
      const { out } = await runWrapper(script, {
        shell,
        onOut: (o) => {
          if (callsAtMarker === undefined && taskEndOf(o, RUN, 1)) callsAtMarker = calls.length;
        },
      });
      expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 3, onstart: false });
      expect(callsAtMarker).toBe(0);
      expect(out).toContain('berth: keep_on_failure_s passed; destroying this instance');
      expect(calls).toEqual([{ method: 'DELETE', path: '/api/v0/instances/42/', body: '{}' }]);
    },
  );

  it('with keep_on_failure_s an onstart that fails keeps too, and a success still stops at once', async () => {
    calls.length = 0;
    const keep = (onstart: string | undefined, run: string) =>
      taskScript({ onstart, run, runId: RUN, n: 1, serviceUrl: url, backstop: null, keepOnFailureS: 1 });
    const failed = await runWrapper(keep('false', 'echo never'));
    expect(taskEndOf(failed.out, RUN, 1)).toEqual({ exitCode: 1, onstart: true });
    expect(calls.map((c) => c.method)).toEqual(['DELETE']);
    calls.length = 0;
    const ok = await runWrapper(keep(undefined, 'echo fine'));
    expect(taskEndOf(ok.out, RUN, 1)).toEqual({ exitCode: 0, onstart: false });
    expect(ok.out).not.toContain('keep_on_failure_s passed');
    expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
  });

  // warm.idle_s (issue #51): a task's own end, with the daemon there to hand the instance on (it
  // acked the end it followed, or took the outputs), leaves its instance running for the next run of
  // its reuse key, and the container destroys it itself once idle_s has passed; anything else stops.
  const warmScript = (run: string, more: { onstart?: string; outputsWaitS?: number } = {}) =>
    taskScript({ run, runId: RUN, n: 1, serviceUrl: url, backstop: null, warmIdleS: 1, ...more });
  /** A container whose daemon follows the task (its .att file) and acks the end marker as followCommands does. */
  async function followed(script: string, shell: 'sh' | 'bash' = 'sh') {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    writeFileSync(join(tmp, `berth-task-${RUN}-1.att`), '');
    let acked = false;
    return runWrapper(script, {
      shell,
      tmp,
      onOut: (text) => {
        if (acked || !text.includes('berth-task-end')) return;
        acked = true;
        execFileSync('/usr/bin/dash', ['-c', `berth_f=${join(tmp, `berth-task-${RUN}-1`)}; echo ack 1<>"$berth_f.ack"`]);
      },
    });
  }

  it.each(['sh', 'bash'] as const)(
    '%s: with warm.idle_s a task that ended on its own, acked, keeps its instance, then destroys it',
    async (shell) => {
      for (const run of ['echo fine', 'exit 3']) {
        calls.length = 0;
        const { out } = await followed(warmScript(run), shell);
        expect(taskEndOf(out, RUN, 1)).not.toBeNull();
        expect(out).toContain('berth: warm idle_s passed; destroying this instance');
        expect(calls).toEqual([{ method: 'DELETE', path: '/api/v0/instances/42/', body: '{}' }]);
      }
    },
  );

  it('with warm.idle_s outputs taken keep it too', async () => {
    calls.length = 0;
    const tmp = mkdtempSync(join(scratch, 'container-'));
    writeFileSync(join(tmp, `berth-task-${RUN}-1.got`), '');
    const taken = await runWrapper(warmScript('echo ran', { outputsWaitS: 5 }), { tmp });
    expect(taken.out).toContain('warm idle_s passed');
    expect(calls.map((c) => c.method)).toEqual(['DELETE']);
  });

  it('with warm.idle_s an onstart that fails, or outputs not taken, stop as without it', async () => {
    calls.length = 0;
    const failed = await followed(warmScript('echo ran', { onstart: 'false' }));
    expect(taskEndOf(failed.out, RUN, 1)).toEqual({ exitCode: 1, onstart: true });
    expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
    // Outputs never taken (no .got within the wait): the stop keeps the disk for them.
    calls.length = 0;
    const untaken = await followed(warmScript('echo ran', { outputsWaitS: 1 }));
    expect(untaken.out).not.toContain('warm idle_s passed');
    expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
  });

  it('with warm.idle_s a daemon that logged in after the end is waited for; with none there it stops', async () => {
    // A daemon that logged in after the end (no .att then) acks it late: a plain .ack, waited for.
    calls.length = 0;
    const lateTmp = mkdtempSync(join(scratch, 'container-'));
    const late = await runWrapper(warmScript('echo ran'), {
      tmp: lateTmp,
      onOut: (text) => {
        if (text.includes('berth-task-end')) writeFileSync(join(lateTmp, `berth-task-${RUN}-1.ack`), 'ack\n');
      },
    });
    expect(late.out).toContain('warm idle_s passed');
    expect(calls.map((c) => c.method)).toEqual(['DELETE']);
    // No daemon following and no outputs: nobody is there to hand it on, and a daemon back later reads the stopped one.
    calls.length = 0;
    const alone = await runWrapper(warmScript('echo ran'));
    expect(alone.out).not.toContain('warm idle_s passed');
    expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
  });

  it('an onstart that ends with exit 0 still runs the task', async () => {
    const { out } = await runWrapper(wrapper('echo setup\nexit 0', 'echo the task ran'));
    expect(out).toContain('the task ran');
    expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 0, onstart: false });
  });

  it('an onstart that fails ends the attempt before the task, with a marker saying so', async () => {
    calls.length = 0;
    const { out } = await runWrapper(wrapper('set -e\nfalse\necho never', 'echo the task ran'));
    expect(out).not.toContain('never');
    expect(out).not.toContain('the task ran');
    expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 1, onstart: true });
    expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
  });

  it('exec, cd and exit stay in the onstart: the task runs where the wrapper is', async () => {
    for (const onstart of ['cd /tmp', 'exec true', 'cd /tmp; exit 0']) {
      const { out } = await runWrapper(wrapper(onstart, 'echo "in $(pwd)"'));
      expect(taskEndOf(out, RUN, 1), `${onstart}: ${out}`).toEqual({ exitCode: 0, onstart: false });
      // The task starts in /root/workdir, made empty (issue #40): $HOME/workdir, HOME being scratch here.
      expect(out).toContain(`in ${join(scratch, 'workdir')}`);
    }
  });

  it('an onstart that kills its process group, or does not parse, fails alone; the wrapper reports it and stops', async () => {
    for (const [onstart, exitCode] of [
      ["trap 'kill 0' EXIT; echo trapped", 143],
      ['if then fi', 2],
    ] as const) {
      calls.length = 0;
      const { out } = await runWrapper(wrapper(onstart, 'echo the task ran'));
      expect(taskEndOf(out, RUN, 1), `${onstart}: ${out}`).toEqual({ exitCode, onstart: true });
      expect(out).not.toContain('the task ran');
      expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
    }
  });

  it('a task that kills its own process group on exit does not take the marker with it', async () => {
    calls.length = 0;
    const { out } = await runWrapper(wrapper(undefined, "trap 'kill 0' EXIT; echo bye; exit 4"));
    // The task's shell is itself killed by its TERM (128 + 15): that is its exit code, and the
    // wrapper, which catches TERM, lives on to write it and stop the instance.
    expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 143, onstart: false });
    expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
  });

  it('in an image with neither curl nor wget the marker is written and the wrapper ends', async () => {
    calls.length = 0;
    const { out, code } = await runWrapper(wrapper('echo setup', 'echo done'), { path: slimBin });
    expect(code).toBe(0);
    expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 0, onstart: false });
    expect(calls).toEqual([]);
  });

  it.each(['sh', 'bash'] as const)(
    '%s: a container started again after its task ended says the same end again and stops, without running onstart or the task again',
    async (shell) => {
      const tmp = mkdtempSync(join(scratch, 'container-'));
      const counter = join(tmp, 'count');
      const script = wrapper(`echo setup >> "${counter}"`, `echo ran >> "${counter}"; echo working; exit 3`);
      calls.length = 0;
      const first = await runWrapper(script, { shell, tmp });
      expect(taskEndOf(first.out, RUN, 1)).toEqual({ exitCode: 3, onstart: false });
      // The restart's log follows the first run's, as docker logs keeps both.
      const again = await runWrapper(script, { shell, tmp });
      expect(again.code).toBe(0);
      expect(again.out).toBe(`\nberth-task-end run=${RUN} attempt=1 exit=3\n`);
      expect(taskEndOf(first.out + again.out, RUN, 1)).toEqual({ exitCode: 3, onstart: false });
      expect(readFileSync(counter, 'utf8')).toBe('setup\nran\n');
      expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}', '{"state":"stopped"}']);
    },
  );

  it('an attempt that ended in its onstart says so again at the next start, and runs nothing', async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    const counter = join(tmp, 'count');
    const script = wrapper(`echo setup >> "${counter}"; exit 5`, 'echo the task ran');
    await runWrapper(script, { tmp });
    const again = await runWrapper(script, { tmp, path: slimBin });
    expect(taskEndOf(again.out, RUN, 1)).toEqual({ exitCode: 5, onstart: true });
    expect(again.out).not.toContain('the task ran');
    expect(readFileSync(counter, 'utf8')).toBe('setup\n');
  });

  it("another attempt's done-file in the same temp directory does not end this one", async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    await runWrapper(wrapper(undefined, 'exit 7', 1), { tmp });
    const second = await runWrapper(wrapper(undefined, 'echo attempt two ran', 2), { tmp });
    expect(second.out).toContain('attempt two ran');
    expect(taskEndOf(second.out, RUN, 2)).toEqual({ exitCode: 0, onstart: false });
  });

  it('a TMPDIR that does not exist: the done-file goes to /tmp instead, and the task ends as before, quietly (#49)', async () => {
    // An attempt number of this process's own: /tmp is shared with every other test run.
    const n = 100_000 + process.pid;
    const base = `/tmp/berth-task-${RUN}-${n}`;
    try {
      const { out } = await runWrapper(wrapper(undefined, 'echo done', n), { tmp: join(scratch, 'no-such-dir') });
      expect(out).toBe(`done\n\nberth-task-end run=${RUN} attempt=${n} exit=0\n`);
      expect(readFileSync(`${base}.done`, 'utf8')).toBe(`berth-task-end run=${RUN} attempt=${n} exit=0\n`);
    } finally {
      for (const suffix of ['done', 'out', 'pid', 'fifo', 'ack']) rmSync(`${base}.${suffix}`, { force: true });
    }
  });

  it("the task's shell writes its own pid to the .pid file, then is the task (the same process: $$ and the exit code are the task's)", async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    const pidFile = join(tmp, `berth-task-${RUN}-1.pid`);
    // A stale pid of an earlier start is emptied before the task starts.
    writeFileSync(pidFile, '1\n');
    const { out } = await runWrapper(
      wrapper(`echo "before: $(cat '${pidFile}')"`, `echo "task $$ $0"; echo "file $(cat '${pidFile}')"; exit 9`),
      { tmp },
    );
    const task = /task (\d+) sh\n/.exec(out);
    expect(out).toContain('before: \n');
    expect(task).not.toBeNull();
    expect(out).toContain(`file ${task![1]}\n`);
    expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 9, onstart: false });
  });

  it.each(['sh', 'bash'] as const)(
    "%s: the task's output also goes to its out-file, and its exit code is still exact (no pipeline)",
    async (shell) => {
      const tmp = mkdtempSync(join(scratch, 'container-'));
      const { out } = await runWrapper(wrapper('echo setup', 'echo one; echo two >&2; exit 3'), { shell, tmp });
      expect(out).toContain('setup\none\ntwo\n');
      expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 3, onstart: false });
      // Only the task's output: onstart's lines and the marker are the log's alone.
      expect(readFileSync(join(tmp, `berth-task-${RUN}-1.out`), 'utf8')).toBe('one\ntwo\n');
      expect(readFileSync(join(tmp, `berth-task-${RUN}-1.done`), 'utf8')).toBe(`berth-task-end run=${RUN} attempt=1 exit=3\n`);
    },
  );

  it('a container started again before its task ended appends to the out-file: what was written is kept', async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    writeFileSync(join(tmp, `berth-task-${RUN}-1.out`), 'before the restart\n');
    await runWrapper(wrapper(undefined, 'echo after the restart'), { tmp });
    expect(readFileSync(join(tmp, `berth-task-${RUN}-1.out`), 'utf8')).toBe('before the restart\nafter the restart\n');
  });

  it('a task that kills its own process group keeps its last lines in the out-file', async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    const { out } = await runWrapper(wrapper(undefined, "trap 'kill 0' EXIT; echo bye; exit 4"), { tmp });
    expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 143, onstart: false });
    // (dash then says the task's shell was `Terminated`, in the log as in the file.)
    expect(readFileSync(join(tmp, `berth-task-${RUN}-1.out`), 'utf8')).toMatch(/^bye\n/);
  });

  it("the done-file is written only once the tee has written the task's last lines to the out-file (#49)", async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    const base = join(tmp, `berth-task-${RUN}-1`);
    // A tee slow to write: it takes the whole output, then appends it a second later.
    const bin = mkdtempSync(join(scratch, 'bin-'));
    writeFileSync(
      join(bin, 'tee'),
      '#!/bin/sh\nberth_t=$(cat); sleep 1; printf \'%s\\n\' "$berth_t" >>"$2"; printf \'%s\\n\' "$berth_t"\n',
      {
        mode: 0o755,
      },
    );
    // What the out-file held the moment the done-file appeared (as the daemon's watch sees it).
    let outAtDone: string | null = null;
    const look = setInterval(() => {
      if (outAtDone === null && existsSync(`${base}.done`))
        outAtDone = existsSync(`${base}.out`) ? readFileSync(`${base}.out`, 'utf8') : '';
    }, 2);
    try {
      const { out } = await runWrapper(wrapper(undefined, 'echo first; echo the last line'), {
        tmp,
        path: `${bin}:/usr/local/bin:/usr/bin:/bin`,
      });
      expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 0, onstart: false });
    } finally {
      clearInterval(look);
    }
    expect(outAtDone).toBe('first\nthe last line\n');
  });

  it('a process the task leaves running with its output open does not hold the end', async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    const { out } = await runWrapper(wrapper(undefined, '(sleep 60; echo late) & echo started; exit 2'), { tmp, timeoutMs: 30_000 });
    expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 2, onstart: false });
    expect(readFileSync(join(tmp, `berth-task-${RUN}-1.out`), 'utf8')).toBe('started\n');
  });

  it('in an image without tee the output goes to the log alone, as before, and the exit code is exact', async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    const noTee = pathWithout(scratch, '/usr/local/bin:/usr/bin:/bin', ['tee', ...HTTP_CLIENTS]);
    const { out } = await runWrapper(wrapper(undefined, 'echo alone; exit 6'), { tmp, path: noTee });
    expect(out).toBe(`alone\n\nberth-task-end run=${RUN} attempt=1 exit=6\n`);
    expect(existsSync(join(tmp, `berth-task-${RUN}-1.out`))).toBe(false);
  });

  it("with a daemon following over SSH (its .att file), the self-stop waits for the daemon's ack on a FIFO, and no longer than its bound", async () => {
    for (const daemon of ['acks', 'is silent'] as const) {
      const tmp = mkdtempSync(join(scratch, 'container-'));
      const ack = join(tmp, `berth-task-${RUN}-1.ack`);
      writeFileSync(join(tmp, `berth-task-${RUN}-1.att`), '');
      // The bound's `sleep` returns at once where the daemon stays silent (the 10 s, shortened).
      const bin = mkdtempSync(join(scratch, 'bin-'));
      if (daemon === 'is silent') writeFileSync(join(bin, 'sleep'), '#!/bin/sh\nexec /bin/sleep 0\n', { mode: 0o755 });
      calls.length = 0;
      ackAtStop.length = 0;
      watchedAck = ack;
      let acked = false;
      const { out } = await runWrapper(wrapper(undefined, 'echo followed'), {
        tmp,
        path: `${bin}:/usr/local/bin:/usr/bin:/bin`,
        // The daemon's watch: once the marker is out, its ack, as followCommands writes it.
        onOut: (text) => {
          if (daemon !== 'acks' || acked || !text.includes('berth-task-end')) return;
          acked = true;
          // The wrapper holds the FIFO open and waits on it, no stop yet.
          expect(statSync(ack).isFIFO()).toBe(true);
          expect(calls).toEqual([]);
          execFileSync('/usr/bin/dash', ['-c', `berth_f=${join(tmp, `berth-task-${RUN}-1`)}; echo ack 1<>"$berth_f.ack"`]);
        },
      });
      watchedAck = undefined;
      expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 0, onstart: false });
      expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
      // Acked: a plain `.ack` file remains, for a start of this container again. Silent: the stop all the same.
      expect(ackAtStop).toEqual([daemon === 'acks']);
      if (daemon === 'is silent') expect(statSync(ack).isFIFO()).toBe(true);
    }
  });

  it('without mkfifo in the image the self-stop naps until the .ack file appears', async () => {
    const tmp = mkdtempSync(join(scratch, 'container-'));
    const ack = join(tmp, `berth-task-${RUN}-1.ack`);
    writeFileSync(join(tmp, `berth-task-${RUN}-1.att`), '');
    const noFifo = pathWithout(scratch, '/usr/local/bin:/usr/bin:/bin', ['mkfifo']);
    // The daemon acks while the wrapper naps for it: a `sleep` that writes the ack at its first nap.
    const bin = mkdtempSync(join(scratch, 'bin-'));
    writeFileSync(join(bin, 'sleep'), `#!/bin/sh\n[ "$1" = 0.2 ] && echo ack 1<>"${ack}"\nexec /bin/sleep "$@"\n`, { mode: 0o755 });
    calls.length = 0;
    ackAtStop.length = 0;
    watchedAck = ack;
    const { out } = await runWrapper(wrapper(undefined, 'echo followed'), { tmp, path: `${bin}:${noFifo}` });
    watchedAck = undefined;
    expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 0, onstart: false });
    expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
    expect(ackAtStop).toEqual([true]);
  });

  it('a first start after the start-by moment (the boot deadline) runs nothing and destroys its instance; a start again is not held to it (#49)', async () => {
    calls.length = 0;
    const late = taskScript({
      run: 'echo the task ran',
      runId: RUN,
      n: 1,
      serviceUrl: url,
      backstop: null,
      startByS: Date.now() / 1000 - 10,
    });
    const tmp = mkdtempSync(join(scratch, 'tmp-'));
    const first = await runWrapper(late, { tmp });
    expect(first.out).not.toContain('the task ran');
    expect(first.out).toContain('started after its boot deadline');
    expect(taskEndOf(first.out, RUN, 1)).toBeNull();
    expect(calls).toEqual([{ method: 'DELETE', path: '/api/v0/instances/42/', body: '{}' }]);
    // In time, the task runs; and a container started again later (its first start recorded) too.
    calls.length = 0;
    const inTime = taskScript({
      run: 'echo the task ran',
      runId: RUN,
      n: 2,
      serviceUrl: url,
      backstop: null,
      startByS: Date.now() / 1000 + 60,
    });
    expect((await runWrapper(inTime)).out).toContain('the task ran');
    const again = mkdtempSync(join(scratch, 'tmp-'));
    writeFileSync(join(again, `berth-task-${RUN}-1.began`), '');
    expect((await runWrapper(late, { tmp: again })).out).toContain('the task ran');
    // An image that cannot destroy its instance (no curl, no wget) runs nothing either, and its
    // marker says the task never started (the attempt fails over), so nothing sits running.
    const slim = await runWrapper(late, { path: slimBin });
    expect(slim.out).not.toContain('the task ran');
    expect(taskEndOf(slim.out, RUN, 1)).toEqual({ exitCode: 1, onstart: false, workdir: true });
  });

  it('the backstop sleeps until an absolute time, so a container started again does not get the limit anew', async () => {
    calls.length = 0;
    const now = Date.now() / 1000;
    // Made 100 s ago with a limit 1 s from now: a relative sleep of the whole limit would wait 101 s.
    const script = taskScript({ run: 'sleep 30', runId: RUN, n: 1, serviceUrl: url, backstop: { atS: now + 1, madeAtS: now - 100 } });
    await runWrapper(script, { timeoutMs: 3_000 });
    expect(calls.map((c) => c.method)).toContain('DELETE');
  });
});

describe("a task's output is live by default (issue #50)", () => {
  const env = 'echo "PYTHONUNBUFFERED=[${PYTHONUNBUFFERED-unset}]"';

  it.each(['sh', 'bash'] as const)("%s: the task's environment has PYTHONUNBUFFERED=1 when nothing set it", async (shell) => {
    const { out } = await runWrapper(wrapper(undefined, env), { shell });
    expect(out).toContain('PYTHONUNBUFFERED=[1]\n');
  });

  it('a value the spec or the image set is kept, even an empty one', async () => {
    for (const value of ['0', '']) {
      const { out } = await runWrapper(wrapper(undefined, env), { env: { PYTHONUNBUFFERED: value } });
      expect(out).toContain(`PYTHONUNBUFFERED=[${value}]\n`);
    }
  });

  it("a Python task's plain print() reaches the out-file before the task goes on", async () => {
    // The task prints, then waits until the line is in its out-file: block-buffered, it never is.
    const tmp = mkdtempSync(join(scratch, 'tmp-'));
    const out = join(tmp, `berth-task-${RUN}-1.out`);
    const py = `import os, time\nprint("line 1")\nfor _ in range(100):\n    if "line 1" in open("${out}").read(): break\n    time.sleep(0.05)\nelse:\n    raise SystemExit(7)\nprint("line 2")`;
    const { out: log } = await runWrapper(wrapper(undefined, `python3 -c '${py}'`), { tmp });
    expect(taskEndOf(log, RUN, 1)).toEqual({ exitCode: 0, onstart: false });
    expect(readFileSync(out, 'utf8')).toBe('line 1\nline 2\n');
  });
});

describe("the task wrapper and a task's workdir (issue #40)", () => {
  const SHA = 'ab'.repeat(32);
  const withWorkdir = (run: string, home: string, waitS: number, dir = '/root/code') =>
    taskScript({
      onstart: 'set -e\necho setup',
      run,
      runId: RUN,
      n: 1,
      serviceUrl: url,
      backstop: null,
      dir,
      workdir: { sha256: SHA, waitS },
    });
  /** What the daemon does: the files first, then the ready-file by a rename. */
  const upload = (dir: string, sha: string) => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'train.sh'), 'echo "training in $(pwd)"\n');
    writeFileSync(join(dir, 'ready.tmp'), `${sha}\n`);
    renameSync(join(dir, 'ready.tmp'), join(dir, WORKDIR_READY_FILE));
  };

  it.each(['sh', 'bash'] as const)(
    '%s: the task starts only once the ready-file holds its sha256, in the workdir, whatever the onstart did',
    async (shell) => {
      const home = mkdtempSync(join(scratch, 'home-'));
      const dir = join(home, 'code');
      const script = withWorkdir('sh train.sh', home, 30);
      let wrongWritten = false;
      const { out, code } = await runWrapperIn(home, script, shell, (sofar) => {
        // Another workdir's hash first (a stale file): the wrapper waits on.
        if (!wrongWritten && sofar.includes('setup')) {
          wrongWritten = true;
          upload(dir, 'cd'.repeat(32));
          setTimeout(() => upload(dir, SHA), 1500);
        }
      });
      expect(out).not.toContain('the task does not start');
      expect(out).toContain(`training in ${dir}`);
      expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 0, onstart: false });
      expect(code).toBe(0);
    },
  );

  it.each(['sh', 'bash'] as const)(
    '%s: a workdir that never arrives ends the attempt with stage=workdir, the task never started, the instance stopped',
    async (shell) => {
      calls.length = 0;
      const home = mkdtempSync(join(scratch, 'home-'));
      const { out } = await runWrapperIn(home, withWorkdir('echo the task ran', home, 1), shell);
      expect(out).not.toContain('the task ran');
      expect(out).toContain('the workdir did not arrive within 1 s; the task does not start');
      expect(taskEndOf(out, RUN, 1)).toEqual({ exitCode: 1, onstart: false, workdir: true });
      expect(calls.map((c) => c.body)).toEqual(['{"state":"stopped"}']);
    },
  );

  it('a workdir_dest outside /root is used as written', async () => {
    const dir = join(mkdtempSync(join(scratch, 'dest-')), 'app');
    upload(dir, SHA);
    const home = mkdtempSync(join(scratch, 'home-'));
    const { out } = await runWrapperIn(home, withWorkdir('sh train.sh', home, 5, dir), 'sh');
    expect(out).toContain(`training in ${dir}`);
  });
});

/** The wrapper with HOME (root's home, where /root/... lands) set to `home`. */
function runWrapperIn(home: string, script: string, shell: 'sh' | 'bash', onOut?: (out: string) => void) {
  return runWrapper(`HOME=${home}; export HOME\n${script}`, { shell, ...(onOut ? { onOut } : {}) });
}
