// The task follower (issue #39 items 2 and 3) on a fake clock with a fake container behind a fake
// shell: output kept with its offset, a drop or a restarted daemon reading on from the stored byte
// (no line lost, none twice), the end seen from the done-file, one event when SSH is refused, and
// the probe left to read what is not followed. The commands themselves run under a real sh at the end.
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  followCommands,
  TaskFollow,
  type FollowedOutput,
  type FollowTarget,
  type TaskShell,
  type TaskShells,
} from '../../../../src/daemon/task-end/task-follow.js';
import { CUT_MARK, FollowedLines, LINE_MAX } from '../../../../src/daemon/task-end/followed-lines.js';
import { silentLogger } from '../../../../src/logger.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const RUN = 'abcdefgh2345';
const T: FollowTarget = { runId: RUN, n: 1, instanceId: 42 };

/** The container's files, as the wrapper writes them. */
class Container {
  out: Buffer | null = null;
  done: string | null = null;
  /** The `.ack`: the daemon holds the task's end and every byte of its output. */
  acked = false;
  /** The stream hands over no byte past this one (a tail that lags); null: every byte at once. */
  streamUpTo: number | null = null;
  /** The image has no `wc`: the watch prints an empty line for the out-file's size. */
  noWc = false;
  /** What the follow's look at the task finds (its `.pid`'s process): `running`, `gone` or `waiting` (no pid yet). */
  task: 'running' | 'gone' | 'waiting' = 'running';
  /** The follow's looks at the task, each time it looked. */
  readonly looks: number[] = [];
  readonly listeners = new Set<() => void>();

  write(text: string): void {
    this.out = Buffer.concat([this.out ?? Buffer.alloc(0), Buffer.from(text)]);
    for (const l of [...this.listeners]) l();
  }

  finish(exitCode: number): void {
    this.done = `berth-task-end run=${RUN} attempt=1 exit=${exitCode}`;
    for (const l of [...this.listeners]) l();
  }
}

/** A login to the container: runs the follower's commands as sh would. */
class FakeShell implements TaskShell {
  closed = false;
  readonly streams: number[] = [];
  /** The drains run (the offset each read from). */
  readonly drains: number[] = [];
  private readonly drops = new Set<(err: Error) => void>();

  constructor(private readonly c: Container) {}

  exec(
    command: string,
    options: { signal: AbortSignal; onStdout: (chunk: Buffer) => void; stdin?: NodeJS.ReadableStream },
  ): Promise<{ code: number | null }> {
    const cmds = followCommands(RUN, 1);
    const c = this.c;
    return new Promise((resolve, reject) => {
      const finish = (fn: () => void) => {
        c.listeners.delete(check);
        this.drops.delete(drop);
        fn();
      };
      const drop = (err: Error) => finish(() => reject(err));
      let sent = -1;
      let watchPrinted = false;
      const stream = /tail -c \+(\d+) -f/.exec(command);
      const check = () => {
        if (command === cmds.watch) {
          if (c.done === null || watchPrinted) return;
          watchPrinted = true;
          // The marker, the out-file's size, then its word: `ack` writes the `.ack`.
          options.onStdout(Buffer.from(`${c.done}\n${c.noWc || c.out === null ? '' : c.out.length}\n`));
          if (!options.stdin) return finish(() => resolve({ code: 0 }));
          let word = '';
          options.stdin.on('data', (b: Buffer) => (word += b.toString()));
          options.stdin.on('end', () =>
            finish(() => {
              if (word === cmds.ack) c.acked = true;
              resolve({ code: 0 });
            }),
          );
          return;
        }
        if (stream && c.out !== null) {
          if (sent < 0) {
            options.onStdout(Buffer.from('berth-follow\n'));
            sent = Number(stream[1]) - 1;
          }
          const upTo = Math.min(c.out.length, c.streamUpTo ?? Infinity);
          if (upTo > sent) options.onStdout(c.out.subarray(sent, upTo));
          sent = Math.max(sent, upTo);
        }
      };
      if (command === cmds.check) {
        c.looks.push(c.looks.length);
        options.onStdout(Buffer.from(`${c.done !== null ? 'done' : c.task}\n`));
        return resolve({ code: 0 });
      }
      if (stream) this.streams.push(Number(stream[1]) - 1);
      const drain = /tail -c \+(\d+) "/.exec(command);
      if (drain && !stream) {
        this.drains.push(Number(drain[1]) - 1);
        if (c.out) options.onStdout(c.out.subarray(Number(drain[1]) - 1));
        c.acked = true;
        return resolve({ code: 0 });
      }
      this.drops.add(drop);
      c.listeners.add(check);
      options.signal.addEventListener('abort', () => drop(new Error('aborted')), { once: true });
      check();
    });
  }

  /** The connection drops: every command fails. */
  drop(): void {
    for (const d of [...this.drops]) d(Object.assign(new Error('dropped'), { code: 'ssh_dropped' }));
  }

  close(): void {
    this.closed = true;
  }
}

interface World {
  clock: FakeClock;
  follow: TaskFollow;
  container: Container;
  shells: FakeShell[];
  opens: number;
  /** What the store holds. */
  kept: FollowedOutput;
  /** Writes to the store (each its own commit). */
  saves: number;
  /** The next saves throw, as a store that cannot be written does. */
  failSaves: number;
  ended: Array<{ exitCode: number; onstart: boolean }>;
  said: Array<{ message: string; data: Record<string, unknown> }>;
  /** Reads of the log through the logs endpoint to keep the task's output. */
  keptLog: number;
  /** What each read of the log through the logs endpoint waits for (resolved: none). */
  logRead: Promise<void>;
  /** The next logins fail with this code. */
  refuse: string | null;
  /** What went to the run's live watchers (`logs --follow`, the dashboard's stream): each batch's bytes and text. */
  live: Array<{ from: number; to: number; text: string }>;
  targets: FollowTarget[];
}

let follows: TaskFollow[] = [];
afterEach(() => {
  for (const f of follows) f.stop();
  follows = [];
});

/** A group commit held until the test says: each end's write waits in `groups`. */
interface HeldCommit {
  write: () => void;
  commit(): void;
  /** The group fails after the write ran: what it wrote is not kept. */
  fail(): void;
}

function world(opts: { container?: Container; kept?: FollowedOutput; clock?: FakeClock; max?: number; groups?: HeldCommit[] } = {}): World {
  const w: World = {
    clock: opts.clock ?? new FakeClock(0),
    follow: undefined as unknown as TaskFollow,
    container: opts.container ?? new Container(),
    shells: [],
    opens: 0,
    kept: opts.kept ?? { offset: 0, tail: null },
    saves: 0,
    failSaves: 0,
    ended: [],
    said: [],
    refuse: null,
    targets: [T],
    keptLog: 0,
    logRead: Promise.resolve(),
    live: [],
  };
  const shells: TaskShells = {
    open: async () => {
      w.opens++;
      if (w.refuse === 'hang') return new Promise<never>(() => undefined);
      if (w.refuse !== null) throw Object.assign(new Error(w.refuse), { code: w.refuse });
      const shell = new FakeShell(w.container);
      w.shells.push(shell);
      return shell;
    },
  };
  w.follow = new TaskFollow({
    clock: w.clock,
    log: silentLogger(),
    shells,
    targets: () => w.targets,
    stored: () => w.kept,
    save: (_t, kept) => {
      if (w.failSaves > 0 && w.failSaves--) throw new Error('berth.db cannot be written');
      w.kept = kept;
      w.saves++;
    },
    scrub: (_t, text) => text.replaceAll('s3cret', '[secret]'),
    output: (_t, from, to, text) => w.live.push({ from, to, text }),
    ended: (_runId, _n, end) => w.ended.push(end),
    say: (_t, message, data) => w.said.push({ message, data }),
    max: opts.max ?? 200,
    keepLog: async () => {
      w.keptLog++;
      await w.logRead;
    },
    ...(opts.groups
      ? {
          commitEnd: (write: () => void) =>
            new Promise<void>((resolve, reject) =>
              opts.groups!.push({
                write,
                commit: () => {
                  write();
                  resolve();
                },
                fail: () => {
                  const before = { kept: w.kept, saves: w.saves };
                  write();
                  ({ kept: w.kept, saves: w.saves } = before);
                  reject(new Error('the group did not commit'));
                },
              }),
            ),
        }
      : {}),
  });
  follows.push(w.follow);
  w.follow.start();
  return w;
}

describe('task follow', () => {
  it("streams the task's complete lines into the kept tail with the offset after them, and sees its end from the done-file", async () => {
    const w = world();
    await w.clock.advance(10);
    // Logged in: the probe leaves it alone; nothing streamed yet (the task's onstart may still run).
    expect(w.follow.followed(T)).toBe(true);
    expect(w.follow.streaming(T)).toBe(false);
    w.container.write('one\ntwo s3cret\nthr');
    expect(w.follow.streaming(T)).toBe(true);
    await w.clock.advance(500);
    // Only complete lines, secrets taken out; the unfinished one waits.
    expect(w.kept).toEqual({ offset: 'one\ntwo s3cret\n'.length, tail: 'one\ntwo [secret]' });
    w.container.write('ee\nlast line, no newline');
    const saves = w.saves;
    w.container.finish(3);
    await w.clock.advance(10);
    // The last lines and the end marker in one write.
    expect(w.saves).toBe(saves + 1);
    expect(w.ended).toEqual([{ exitCode: 3, onstart: false }]);
    // The marker after the output, as the log shows it.
    expect(w.kept.tail).toBe(`one\ntwo [secret]\nthree\nlast line, no newline\n\nberth-task-end run=${RUN} attempt=1 exit=3`);
    expect(w.kept.offset).toBe(w.container.out!.length);
    // Every byte came through the stream: no drain, the watch wrote the `.ack` on the daemon's word.
    expect(w.shells[0]!.drains).toEqual([]);
    expect(w.container.acked).toBe(true);
    expect(w.shells[0]!.closed).toBe(true);
    expect(w.said).toEqual([]);
    expect(w.keptLog).toBe(0);
  });

  it("the end waits for the stream to hand over the out-file's last bytes, then acks; a stream that lags past 3 s is drained", async () => {
    for (const lag of ['caught up', 'lagging'] as const) {
      const w = world();
      await w.clock.advance(10);
      w.container.write('a\nb\n');
      await w.clock.advance(500);
      // The stream's tail has not read the last line yet when the done-file comes.
      w.container.streamUpTo = 4;
      w.container.write('last\n');
      w.container.finish(0);
      await w.clock.advance(1_000);
      expect(w.ended).toEqual([]);
      expect(w.container.acked).toBe(false);
      if (lag === 'caught up') {
        w.container.streamUpTo = null;
        w.container.write('');
        await w.clock.advance(10);
        expect(w.shells[0]!.drains).toEqual([]);
      } else {
        await w.clock.advance(2_000);
        expect(w.shells[0]!.drains).toEqual([4]);
      }
      expect(w.ended).toEqual([{ exitCode: 0, onstart: false }]);
      expect(w.container.acked).toBe(true);
      expect(w.kept).toEqual({ offset: 9, tail: `a\nb\nlast\n\nberth-task-end run=${RUN} attempt=1 exit=0` });
      w.follow.stop();
    }
  });

  it("without the out-file's size (no wc in the image) the end drains the rest", async () => {
    const w = world();
    w.container.noWc = true;
    await w.clock.advance(10);
    w.container.write('x\n');
    w.container.finish(0);
    await w.clock.advance(10);
    expect(w.shells[0]!.drains).toEqual([2]);
    expect(w.ended).toEqual([{ exitCode: 0, onstart: false }]);
    expect(w.container.acked).toBe(true);
    expect(w.kept.offset).toBe(2);
  });

  it('a dropped connection attaches again at the stored offset: no line lost, none kept twice, and the probe reads meanwhile', async () => {
    const w = world();
    await w.clock.advance(10);
    w.container.write('a\nb\npar');
    await w.clock.advance(500);
    w.shells[0]!.drop();
    await w.clock.advance(1);
    expect(w.follow.followed(T)).toBe(false);
    // The task runs on, detached.
    w.container.write('tial\nc\n');
    await w.clock.advance(1_000);
    expect(w.opens).toBe(2);
    expect(w.shells[1]!.streams).toEqual([4]);
    expect(w.follow.followed(T)).toBe(true);
    expect(w.follow.streaming(T)).toBe(true);
    w.container.finish(0);
    await w.clock.advance(10);
    expect(w.kept.tail).toBe(`a\nb\npartial\nc\n\nberth-task-end run=${RUN} attempt=1 exit=0`);
    expect(w.ended).toEqual([{ exitCode: 0, onstart: false }]);
    expect(w.said).toEqual([]);
  });

  it('a restarted daemon reads on from the byte the store holds', async () => {
    const container = new Container();
    const first = world({ container });
    await first.clock.advance(10);
    container.write('1\n2\n3\n');
    await first.clock.advance(500);
    // The daemon is killed: lines read but not yet stored are read again by the next one.
    container.write('4\n5\n');
    first.follow.stop();
    container.write('6\n');
    const second = world({ container, kept: first.kept, clock: first.clock });
    await second.clock.advance(10);
    expect(second.shells[0]!.streams).toEqual(['1\n2\n3\n'.length]);
    container.finish(0);
    await second.clock.advance(10);
    expect(second.kept.tail).toBe(`1\n2\n3\n4\n5\n6\n\nberth-task-end run=${RUN} attempt=1 exit=0`);
  });

  it.each(['ssh_auth_refused', 'ssh_host_key_changed'])(
    '%s: one event says the logs path reads the task; not tried again, never followed',
    async (code) => {
      const w = world();
      w.refuse = code;
      await w.clock.advance(10 * 60_000);
      expect(w.opens).toBe(1);
      expect(w.said).toHaveLength(1);
      expect(w.said[0]!.message).toMatch(/logs endpoint/);
      expect(w.said[0]!.data).toEqual({ n: 1, instanceId: 42, code });
      expect(w.follow.followed(T)).toBe(false);
      expect(w.ended).toEqual([]);
    },
  );

  it('an unreachable instance is tried again with backoff; one event once it stays so, and followed once it answers', async () => {
    const w = world();
    w.refuse = 'ssh_unreachable';
    await w.clock.advance(60_000);
    expect(w.said).toEqual([]);
    const tries = w.opens;
    expect(tries).toBeGreaterThan(3);
    await w.clock.advance(10 * 60_000);
    expect(w.said).toHaveLength(1);
    // Backing off: far fewer tries in ten minutes than in the first one.
    expect(w.opens - tries).toBeLessThan(15);
    w.refuse = null;
    w.container.write('up\n');
    await w.clock.advance(60_000);
    expect(w.follow.followed(T)).toBe(true);
    expect(w.said).toHaveLength(1);
  });

  it('while the first login hangs, the probe waits 3 s at most, then reads the task', async () => {
    const w = world();
    w.refuse = 'hang';
    await w.clock.advance(1_000);
    expect(w.follow.followed(T)).toBe(true);
    await w.clock.advance(2_500);
    expect(w.follow.followed(T)).toBe(false);
  });

  it('an image without the out-file (no tee): its end is still seen from the done-file, and its log read once to keep its output', async () => {
    const w = world();
    await w.clock.advance(5_000);
    expect(w.follow.streaming(T)).toBe(false);
    w.container.finish(1);
    await w.clock.advance(10);
    expect(w.ended).toEqual([{ exitCode: 1, onstart: false }]);
    expect(w.keptLog).toBe(1);
  });

  it("the end's write goes in a group commit: the wrapper's ack waits for it; a group that fails sends no ack, and the follow reads the end again", async () => {
    const groups: HeldCommit[] = [];
    const w = world({ groups });
    await w.clock.advance(10);
    w.container.write('a\n');
    await w.clock.advance(500);
    w.container.write('last');
    w.container.finish(0);
    await w.clock.advance(10);
    // The last lines and the end wait for the group: not stored, not acked.
    expect(groups).toHaveLength(1);
    expect(w.ended).toEqual([]);
    expect(w.kept).toEqual({ offset: 2, tail: 'a' });
    expect(w.container.acked).toBe(false);
    groups[0]!.fail();
    await w.clock.advance(10);
    // Not kept, so no ack: the wrapper's instance stays up for the next login; and not live either.
    expect(w.container.acked).toBe(false);
    expect(w.live.filter((l) => l.text.includes('last'))).toEqual([]);
    expect(w.kept).toEqual({ offset: 2, tail: 'a' });
    await w.clock.advance(1_000);
    // Logged in again, streaming from the byte the store holds, and the end read again.
    expect(w.shells).toHaveLength(2);
    expect(w.shells[1]!.streams).toEqual([2]);
    expect(groups).toHaveLength(2);
    groups[1]!.commit();
    await w.clock.advance(10);
    expect(w.kept).toEqual({ offset: 6, tail: `a\nlast\n\nberth-task-end run=${RUN} attempt=1 exit=0` });
    // Committed: the last line goes live, once.
    expect(w.live.filter((l) => l.text.includes('last'))).toEqual([{ from: 2, to: 6, text: 'last' }]);
    expect(w.container.acked).toBe(true);
    expect(w.ended.at(-1)).toEqual({ exitCode: 0, onstart: false });
  });

  it('the last lines that cannot be stored at the end hold the ack and the end: the follow logs in again and keeps them once', async () => {
    const w = world();
    await w.clock.advance(10);
    w.container.write('a\n');
    await w.clock.advance(500);
    w.container.write('last');
    w.failSaves = 1;
    w.container.finish(0);
    await w.clock.advance(10);
    // Not stored: no ack (the instance stays up for the next login), no end sent.
    expect(w.container.acked).toBe(false);
    expect(w.ended).toEqual([]);
    expect(w.kept).toEqual({ offset: 2, tail: 'a' });
    await w.clock.advance(1_000);
    expect(w.shells[1]!.streams).toEqual([2]);
    expect(w.kept).toEqual({ offset: 6, tail: `a\nlast\n\nberth-task-end run=${RUN} attempt=1 exit=0` });
    expect(w.ended).toEqual([{ exitCode: 0, onstart: false }]);
    expect(w.container.acked).toBe(true);
  });

  it('a task that printed nothing: the watch acks at once (its instance may stop) while its log is read to keep its output', async () => {
    const w = world();
    let release!: () => void;
    w.logRead = new Promise<void>((r) => (release = r));
    await w.clock.advance(10);
    w.container.write('');
    w.container.finish(0);
    await w.clock.advance(10);
    expect(w.keptLog).toBe(1);
    // The wrapper's self-stop is not held for the log read (up to a second or more on the service).
    expect(w.container.acked).toBe(true);
    expect(w.ended).toEqual([]);
    release();
    await w.clock.advance(10);
    expect(w.ended).toEqual([{ exitCode: 0, onstart: false }]);
    expect(w.shells[0]!.drains).toEqual([]);
  });

  it('an attempt that no longer runs (outbid, a host that failed) ends its session without an end', async () => {
    const w = world();
    await w.clock.advance(10);
    w.container.write('x\n');
    w.targets = [];
    await w.clock.advance(2_000);
    expect(w.follow.followed(T)).toBe(false);
    expect(w.shells[0]!.closed).toBe(true);
    w.container.finish(0);
    await w.clock.advance(2_000);
    expect(w.ended).toEqual([]);
    expect(w.opens).toBe(1);
  });

  it('follows at most `max` attempts at once; the others are left to the probe', async () => {
    const w = world({ max: 1 });
    const other: FollowTarget = { runId: 'zzzzzzzzzzzz', n: 1, instanceId: 43 };
    w.targets = [T, other];
    await w.clock.advance(10);
    w.container.write('x\n');
    expect(w.opens).toBe(1);
    expect(w.follow.followed(T)).toBe(true);
    expect(w.follow.followed(other)).toBe(false);
    expect(w.follow.streaming(other)).toBe(false);
  });

  it('lines a failed store write did not keep never reach the live watchers; once stored they go, once (#49)', async () => {
    const w = world();
    await w.clock.advance(10);
    w.container.write('a\n');
    w.failSaves = 1;
    await w.clock.advance(500);
    // The write failed: nothing stored, nothing live.
    expect(w.kept).toEqual({ offset: 0, tail: null });
    expect(w.live).toEqual([]);
    w.container.write('b\n');
    await w.clock.advance(500);
    // Stored at the next flush, with what came since, and sent live in that one batch.
    expect(w.kept).toEqual({ offset: 4, tail: 'a\nb' });
    expect(w.live).toEqual([{ from: 0, to: 4, text: 'a\nb\n' }]);
    // The end's last lines, whose write fails: none goes live before a write that keeps it, and none twice.
    w.container.write('last\n');
    w.failSaves = 1;
    w.container.finish(0);
    await w.clock.advance(10);
    expect(Math.max(...w.live.map((l) => l.to))).toBeLessThanOrEqual(w.kept.offset);
    await w.clock.advance(1_000);
    expect(w.ended).toEqual([{ exitCode: 0, onstart: false }]);
    expect(w.live).toEqual([
      { from: 0, to: 4, text: 'a\nb\n' },
      { from: 4, to: 9, text: 'last\n' },
    ]);
  });

  it('a line longer than 64 KiB keeps its first 64 KiB and a mark; the rest of it is passed over, the next line kept whole', async () => {
    const w = world();
    await w.clock.advance(10);
    w.container.write(`${'y'.repeat(70 * 1024)}`);
    await w.clock.advance(500);
    // Cut at once, not held until its newline: the offset is past every byte read.
    expect(w.kept.offset).toBe(70 * 1024);
    expect(w.kept.tail).toMatch(/y \u2026 \[line cut at 64 KiB\]$/);
    w.container.write(`${'y'.repeat(1024)}\nnext\n`);
    await w.clock.advance(500);
    expect(w.kept.offset).toBe(71 * 1024 + 'next\n'.length + 1);
    // The tail's 4 KB hold the last line only (the cut one does not fit beside it).
    expect(w.kept.tail).toMatch(/\nnext$/);
  });

  it('a task whose process is gone with no done-file (a full temp directory) is handed to the logs path: one event, no end sent, not followed again', async () => {
    const w = world();
    await w.clock.advance(10);
    w.container.write('working\n');
    await w.clock.advance(30_000);
    // Running: looked at every 10 s, still followed.
    expect(w.container.looks.length).toBeGreaterThanOrEqual(2);
    expect(w.follow.followed(T)).toBe(true);
    // The task ends; its wrapper could not write the done-file.
    w.container.task = 'gone';
    await w.clock.advance(10_000);
    // One look is not enough: the done-file may be on its way (the wrapper waits for its tee first).
    expect(w.follow.followed(T)).toBe(true);
    await w.clock.advance(10_000);
    expect(w.follow.followed(T)).toBe(false);
    expect(w.follow.streaming(T)).toBe(false);
    expect(w.said).toHaveLength(1);
    expect(w.said[0]!.message).toMatch(/no longer running and left no done-file.*logs endpoint/);
    expect(w.said[0]!.data).toEqual({ n: 1, instanceId: 42, code: 'task_gone' });
    expect(w.ended).toEqual([]);
    // What was read before is kept; the follow is over for this attempt.
    expect(w.kept.tail).toBe('working');
    await w.clock.advance(5 * 60_000);
    expect(w.opens).toBe(1);
    expect(w.said).toHaveLength(1);
  });

  it('a task whose pid is not written yet (onstart still running) stays followed; a gone look then a running one starts the count again', async () => {
    const w = world();
    w.container.task = 'waiting';
    await w.clock.advance(60_000);
    expect(w.follow.followed(T)).toBe(true);
    w.container.task = 'gone';
    await w.clock.advance(10_000);
    w.container.task = 'running';
    await w.clock.advance(10_000);
    w.container.task = 'gone';
    await w.clock.advance(10_000);
    expect(w.follow.followed(T)).toBe(true);
    w.container.finish(0);
    await w.clock.advance(10);
    expect(w.ended).toEqual([{ exitCode: 0, onstart: false }]);
    expect(w.said).toEqual([]);
  });

  it("a done-file that holds no end marker (64 MB a task wrote there) hands the task to the logs path at once, the watch's output kept bounded", async () => {
    const w = world();
    await w.clock.advance(10);
    w.container.done = 'x'.repeat(64 * 1024 * 1024);
    w.container.write('');
    await w.clock.advance(10);
    expect(w.follow.followed(T)).toBe(false);
    expect(w.said.map((s) => s.data['code'])).toEqual(['no_marker']);
    expect(w.ended).toEqual([]);
    await w.clock.advance(60_000);
    expect(w.opens).toBe(1);
  });
});

describe('followed lines (the out-file cut into lines, bounded)', () => {
  it('a 64 MB line in 32 KiB chunks: at most 64 KiB held at any time, one line kept with its mark, every byte counted', () => {
    const lines = new FollowedLines();
    const chunk = Buffer.alloc(32 * 1024, 'z');
    let most = 0;
    const total = 64 * 1024 * 1024;
    for (let sent = 0; sent < total; sent += chunk.length) {
      lines.push(chunk);
      most = Math.max(most, lines.heldBytes);
    }
    lines.push(Buffer.from('\nafter\n'));
    const taken = lines.take()!;
    expect(taken.bytes).toBe(total + '\nafter\n'.length);
    expect(taken.text).toBe(`${'z'.repeat(LINE_MAX)}${CUT_MARK}\nafter\n`);
    expect(most).toBeLessThanOrEqual(Buffer.byteLength(CUT_MARK) + LINE_MAX + 1);
  });

  it('short lines come through whole, an unfinished one waits, and take(all) hands it over', () => {
    const lines = new FollowedLines();
    lines.push(Buffer.from('a\nbb\nc'));
    lines.push(Buffer.from('c\nd'));
    expect(lines.readBytes).toBe(9);
    expect(lines.take()).toEqual({ text: 'a\nbb\ncc\n', bytes: 8 });
    expect(lines.take()).toBeNull();
    expect(lines.take(true)).toEqual({ text: 'd', bytes: 1 });
    expect(lines.empty).toBe(true);
  });
});

/** Runs `command` under dash with the container's temp directory; resolves with its output once `until` holds. */
function sh(
  command: string,
  tmp: string,
  until: (out: string) => boolean,
  onOut?: (out: string) => void,
  path = '/usr/bin:/bin',
  onSpawn?: (pid: number) => void,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/dash', ['-c', command], { env: { PATH: path, TMPDIR: tmp }, detached: true });
    child.on('spawn', () => onSpawn?.(child.pid!));
    let out = '';
    const done = () => {
      process.kill(-child.pid!, 'SIGKILL');
      resolve(out);
    };
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      onOut?.(out);
      if (until(out)) done();
    });
    child.on('error', reject);
    child.on('close', () => resolve(out));
  });
}

/** A process's file under /proc, '' once it is gone (the shell's children come and go). */
function procFile(name: string): (pid: string) => string {
  return (pid) => {
    try {
      return readFileSync(`/proc/${pid}/${name}`, 'utf8').trim();
    } catch {
      return '';
    }
  };
}

function childrenOf(pid: number): string[] {
  return pid === 0 ? [] : procFile(`task/${pid}/children`)(String(pid)).split(' ').filter(Boolean);
}

/**
 * Runs the watch under dash until it ends by itself (its pipeline's `tail` too: dash waits for it),
 * given `word` on its standard input once it printed its two lines (null: end-of-file only).
 */
function watchUntilItEnds(command: string, tmp: string, word: string | null, path = '/usr/bin:/bin'): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/dash', ['-c', command], { env: { PATH: path, TMPDIR: tmp }, detached: true });
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.split('\n').length > 2 && child.stdin.writable) child.stdin.end(word ?? undefined);
    });
    child.on('error', reject);
    child.on('close', () => resolve(out));
  });
}

describe('the follow commands under a real sh', () => {
  it('stream from an offset and on as the file grows, drain the rest, and read the done-file and the size', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'berth-follow-'));
    try {
      const base = join(tmp, `berth-task-${RUN}-1`);
      const cmds = followCommands(RUN, 1);
      writeFileSync(`${base}.out`, 'abc\ndef\n');
      let appended = false;
      // Appended once the stream has handed over what was there: tail -f hands it over too.
      const streamed = sh(
        cmds.stream(4),
        tmp,
        (out) => out.includes('ghi\n'),
        (out) => {
          if (appended || !out.includes('def\n')) return;
          appended = true;
          appendFileSync(`${base}.out`, 'ghi\n');
        },
      );
      expect(await streamed).toBe('berth-follow\ndef\nghi\n');
      // The stream said a daemon follows; the drain says it has read the end.
      expect(existsSync(`${base}.att`)).toBe(true);
      expect(await sh(cmds.drain(8), tmp, () => false)).toBe('ghi\n');
      expect(existsSync(`${base}.ack`)).toBe(true);
      rmSync(`${base}.ack`);
      const marker = `berth-task-end run=${RUN} attempt=1 exit=5`;
      writeFileSync(`${base}.done`, `${marker}\n`);
      // The watch: the marker, the out-file's size; the `.ack` only on the daemon's `ack`, and it
      // ends by itself either way (its tail with it), with and without tail and wc in the image.
      const bare = mkdtempSync(join(tmpdir(), 'berth-follow-bin-'));
      symlinkSync('/usr/bin/dash', join(bare, 'sh'));
      try {
        for (const [path, size] of [
          ['/usr/bin:/bin', '12'],
          [bare, ''],
        ] as const) {
          expect(await watchUntilItEnds(cmds.watch, tmp, null, path)).toBe(`${marker}\n${size}\n`);
          expect(existsSync(`${base}.ack`)).toBe(false);
          expect(await watchUntilItEnds(cmds.watch, tmp, 'no\n', path)).toBe(`${marker}\n${size}\n`);
          expect(existsSync(`${base}.ack`)).toBe(false);
          expect(await watchUntilItEnds(cmds.watch, tmp, cmds.ack, path)).toBe(`${marker}\n${size}\n`);
          expect(existsSync(`${base}.ack`)).toBe(true);
          rmSync(`${base}.ack`);
        }
      } finally {
        rmSync(bare, { recursive: true, force: true });
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("the look at the task: running while its .pid's process is there, gone once it is not, waiting without a pid, done with a done-file", async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'berth-follow-'));
    try {
      const base = join(tmp, `berth-task-${RUN}-1`);
      const look = () => sh(followCommands(RUN, 1).check, tmp, () => false).then((out) => out.trim());
      expect(await look()).toBe('waiting');
      writeFileSync(`${base}.pid`, '');
      expect(await look()).toBe('waiting');
      writeFileSync(`${base}.pid`, `${process.pid}\n`);
      expect(await look()).toBe('running');
      // A process that has ended (and was waited for): its pid names nothing.
      const ended = spawn('/bin/true');
      await new Promise((r) => ended.on('close', r));
      writeFileSync(`${base}.pid`, `${ended.pid}\n`);
      expect(await look()).toBe('gone');
      // An empty done-file (a full disk) or a directory in its place is none.
      writeFileSync(`${base}.done`, '');
      expect(await look()).toBe('gone');
      writeFileSync(`${base}.done`, `berth-task-end run=${RUN} attempt=1 exit=0\n`);
      expect(await look()).toBe('done');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('the watch waits for a done-file written after it started, with tail and without', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'berth-follow-'));
    // An image without tail: the shell and sleep only.
    const bare = mkdtempSync(join(tmpdir(), 'berth-follow-bin-'));
    symlinkSync('/usr/bin/dash', join(bare, 'sh'));
    symlinkSync('/usr/bin/sleep', join(bare, 'sleep'));
    let pid = 0;
    try {
      const base = join(tmp, `berth-task-${RUN}-1`);
      const cmds = followCommands(RUN, 1);
      const marker = `berth-task-end run=${RUN} attempt=1 exit=0\n`;
      for (const path of ['/usr/bin:/bin', bare]) {
        rmSync(`${base}.done`, { force: true });
        pid = 0;
        const watched = sh(
          cmds.watch,
          tmp,
          (out) => out.split('\n').length > 2,
          undefined,
          path,
          (p) => (pid = p),
        );
        // The file comes once the watch waits: its shell has started tail, or the loop's sleep.
        // (A child still named dash has not exec'd yet, is the pipeline's reader, or tail's attempt
        // where there is none.)
        let comm = '';
        while (comm === '') {
          await new Promise((r) => setImmediate(r));
          comm =
            childrenOf(pid)
              .map(procFile('comm'))
              .find((c) => c === 'tail' || c === 'sleep') ?? '';
        }
        // Where tail works, the wait is one tail process, not a loop of sleeps (a process a tick).
        expect(comm).toBe(path === bare ? 'sleep' : 'tail');
        writeFileSync(`${base}.done`, marker);
        // No out-file: its size is an empty line (the daemon then drains).
        expect(await watched).toBe(`${marker}\n`);
      }
    } finally {
      // A watch left waiting by a failed expectation (its group: the shell and its tail or sleep).
      try {
        if (pid !== 0) process.kill(-pid, 'SIGKILL');
      } catch {
        // Gone already: its output ended the wait.
      }
      rmSync(tmp, { recursive: true, force: true });
      rmSync(bare, { recursive: true, force: true });
    }
  });
});
