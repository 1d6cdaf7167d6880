// The task follower (issue #39 items 2 and 3): a running task's output and end read over SSH, live,
// with no call to the logs endpoint. The wrapper (src/job-spec/task-script.ts) appends the task's
// output to an out-file in the container and writes its end marker to a done-file before it logs
// it; here the daemon logs in and, on one connection per attempt, runs two commands of its own:
//   - the watch: the done-file's line, the end marker, the same the log would show, then the
//     out-file's size (final: the wrapper writes the done-file only after its `tee` has ended),
//     then it waits for the daemon's word on its standard input and writes the `.ack` the wrapper's
//     self-stop waits for (the stream wrote `.att` when it began): a task that stops its own
//     instance ends through this login, not the logs endpoint, and only once the daemon holds its
//     last byte. `tail -F` waits for the done-file to appear in one process (GNU tail polls a
//     missing file: every 0.2 s with `-s`, every 1 s without, measured here) and ends once the
//     shell has read its line (it sees its reader gone); an image without a `tail` that takes
//     `-s 0.2 -F` (busybox's takes whole seconds) falls back to a loop of the shell's own test and
//     a short sleep: five processes a second, which for a hundred followed tasks on one simulator
//     host were 500 forks a second, most of its load;
//   - the stream: waits for the out-file, says `berth-follow` on a line of its own, then
//     `tail -c +K -f` from the byte after the last one kept. At the end the daemon waits (at most
//     CATCH_UP_MS) until it has read up to the size the watch printed, then says `ack`: no third
//     command per task end. A hundred tasks ending together on the simulator's one host (every
//     instance's sshd in one process, each command a process it starts) spent ~20 s in that third
//     command, one after another;
//   - the drain, only where the stream cannot do it (no `tail` in the image, a stream that lags,
//     no `wc` for the size): `tail -c +K` once, the bytes after the last one read, then the `.ack`.
//   - the look, every CHECK_MS while the done-file is not read (issue #49): whether the task's
//     process (the `.pid` its shell wrote) is still there. A task gone with no done-file (a full
//     temp directory, a done-file that cannot be written) at GONE_LOOKS looks in a row is handed to
//     the logs path with one event: the wrapper printed its end marker to the log all the same, and
//     the probe reads it there. A done-file that holds no end marker is handed over the same way.
// Complete lines go to the store with the offset of the byte after them, in one write
// (`save`: the attempt's kept tail and its `follow_offset`), every FLUSH_MS or once PENDING_MAX
// bytes wait: a daemon killed at any moment starts again at the stored offset, with no line lost
// and none kept twice. An unfinished line waits for its end; a line past LINE_MAX is cut there with
// a mark and the rest of it passed over (./followed-lines.ts). The watch's output is kept to WATCH_MAX.
//
// While logged in (and for FIRST_LOGIN_CLAIM_MS while the first login is tried), the attempt is `followed()`: the task probe
// makes no logs-endpoint call for it (./task-probe.ts); while the stream runs, `berth logs` reads
// what was kept (`streaming()`). The moment the connection fails, it is no longer followed and the
// probe reads it again at its next tick (the runs' composition syncs the follower before each of
// the probe's ticks, so a task new to both is tried over SSH first). What a failure means:
//   - a dropped connection (`ssh_dropped`, or anything unexpected): attached again with backoff
//     (RETRY_FIRST_MS doubling to RETRY_MAX_MS), at the stored offset; the task runs on, detached;
//   - a refused key (`ssh_auth_refused`), a changed host key (`ssh_host_key_changed`), a key berth
//     cannot use (`ssh_key`): not tried again for this attempt; ONE event says why, and the logs path reads
//     the task as before;
//   - an unreachable address or a proxy down (`ssh_unreachable`): tried again with backoff (an sshd
//     may come up late); ONE event once it has failed for UNREACHABLE_SAY_MS;
//   - an image without `tee` or `tail`: no stream; the watch still sees the end, and the log's last
//     lines are read once through the logs endpoint then (`keepLog`), to keep the task's output.
// Nothing here ever destroys an instance or judges a task lost: it sends the same TASK_END as the
// probe (`ended`), and an outbid or a host failure ends the attempt's follow when the run no longer
// lists it among its targets (the machine decides as today).
//
// Bound: at most `max` attempts followed at once (runs.task_follow_max); above it the probe reads
// them. Per followed attempt: one SSH connection (one socket) with two channels at a time (three
// during a look or a drain), and at most PENDING_MAX + LINE_MAX bytes of output held, plus the
// kept tail (4 KB) and WATCH_MAX of the watch's, whatever the container prints. A task whose
// done-file never comes is the logs path's within GONE_LOOKS × CHECK_MS of its process's end.
import { PassThrough } from 'node:stream';
import type { Clock, Timer } from '../../clock.js';
import { toRunError } from '../../errors.js';
import { taskEndOf, taskFilesVar } from '../../job-spec/task-script.js';
import type { Logger } from '../../logger.js';
import { PeriodicLoop } from '../../periodic-loop.js';
import { keptTail } from './failure-logs.js';
import { FollowedLines, type HeldLines } from './followed-lines.js';

/** How often the store is written while output comes, ms: the lag `berth logs` sees at most from this daemon. */
const FLUSH_MS = 200;
/** Output held before it is written at once, bytes. */
const PENDING_MAX = 256 * 1024;
/**
 * The watch's output kept at most, bytes: its two lines (the end marker, under 100 bytes, and a
 * size) fit many times over; a done-file holding more (a task that wrote there) is no end marker.
 */
const WATCH_MAX = 4096;
/** How often a followed task's process is looked at while its done-file is not there, ms. */
const CHECK_MS = 10_000;
/**
 * Looks in a row that find the task's process gone and no done-file before the follow hands the
 * task to the logs path: the wrapper writes the done-file at most ~5 s after its task ends (its
 * `tee` waited for), so two looks CHECK_MS apart never take a done-file on its way for none.
 */
const GONE_LOOKS = 2;
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 60_000;
/** How long an address may stay unreachable before the run's events say the logs path reads the task. */
const UNREACHABLE_SAY_MS = 120_000;
/**
 * How long the probe leaves a task alone while the first login to it is tried: a login takes well
 * under this where SSH works, and an address that never answers (a NAT, a firewall) delays the
 * probe's first read by no more than this.
 */
const FIRST_LOGIN_CLAIM_MS = 3000;
/** How often the runs are asked which tasks run. */
const TICK_MS = 1000;
/**
 * How long a task's end waits for the stream to hand over the out-file's last bytes before it
 * drains them in a command of its own: GNU tail -f hands them over at once (inotify), a polling
 * one within its 1 s.
 */
const CATCH_UP_MS = 3000;
/** How long a task's end waits for the watch to take its `ack` (write the `.ack`) before the login closes. */
const ACK_WAIT_MS = 3000;
/**
 * The ack the wrapper's self-stop waits for: a line to its `.ack` FIFO, opened read-write so that
 * it never blocks (a wrapper gone leaves no reader); where the wrapper made no FIFO, a file it sees.
 */
const ACK_WRITE = 'echo ack 1<>"$berth_f.ack"';
/** The first line the stream prints once the out-file is there. */
const STREAM_HEADER = 'berth-follow\n';

/** A running task's attempt, as the runs name it. */
export interface FollowTarget {
  runId: string;
  n: number;
  instanceId: number;
}

/** One login to an attempt's instance (src/ssh's session is one). */
export interface TaskShell {
  /**
   * Runs `command` in the container, its stdout handed over as it comes; resolves with its exit
   * code (null: ended by a signal), rejects with an error whose `code` says why (`ssh_dropped`...).
   * An abort ends the command's channel. Without `stdin` the command reads end-of-file at once.
   */
  exec(
    command: string,
    options: { signal: AbortSignal; onStdout: (chunk: Buffer) => void; stdin?: NodeJS.ReadableStream },
  ): Promise<{ code: number | null }>;
  close(): void;
}

export interface TaskShells {
  /** Logs in to the attempt's instance; rejects with an error whose `code` says why. */
  open(target: FollowTarget, signal: AbortSignal): Promise<TaskShell>;
}

/** What was kept of an attempt's followed output: the byte after it, and its kept tail. */
export interface FollowedOutput {
  offset: number;
  tail: string | null;
}

export interface TaskFollowDeps {
  clock: Clock;
  log: Logger;
  shells: TaskShells;
  /** The task attempts whose instance runs now (asked every tick). */
  targets(): FollowTarget[];
  /** What the store holds of the attempt's followed output. */
  stored(t: FollowTarget): FollowedOutput;
  /** Keeps the attempt's new offset and tail, in one write. */
  save(t: FollowTarget, kept: FollowedOutput & { tail: string }): void;
  /** The lines just kept (scrubbed), bytes `from` to `to` of the out-file: to the run's live watchers (./live-output.ts). */
  output?(t: FollowTarget, from: number, to: number, text: string): void;
  /** Every secret the attempt's container may show, taken out of `text`. */
  scrub(t: FollowTarget, text: string): string;
  /** The attempt's task ended, as its done-file says: the same as the task probe's. */
  ended(runId: string, n: number, end: { exitCode: number; onstart: boolean }): void;
  /** One event on the run (the follow falls back to the logs path, and why). */
  say(t: FollowTarget, message: string, data: Record<string, unknown>): void;
  /** Attempts followed at once at most. */
  max: number;
  /** The attempt's task ended and no out-file was read: its log's last lines kept through the logs path. */
  keepLog?(t: FollowTarget, signal: AbortSignal): Promise<void>;
  /**
   * Runs `write` (a task's last lines and its end) in one commit with the other tasks ending now
   * (../../store/group-commit.ts); resolves once committed, rejects if it did not commit. Without
   * it, `write` runs at once.
   */
  commitEnd?(write: () => void): Promise<void>;
}

/** Why a login or a session failed, as the ssh room's errors say (`code`). */
type Why = 'refused' | 'unreachable' | 'dropped';

function whyOf(err: unknown): { why: Why; code: string } {
  const code = typeof (err as { code?: unknown })?.code === 'string' ? (err as { code: string }).code : 'ssh_dropped';
  if (code === 'ssh_auth_refused' || code === 'ssh_host_key_changed' || code === 'ssh_key') return { why: 'refused', code };
  if (code === 'ssh_unreachable') return { why: 'unreachable', code };
  return { why: 'dropped', code };
}

const SAY: Record<string, string> = {
  task_gone: 'its task is no longer running and left no done-file that berth can read (a full or unwritable temp directory)',
  no_marker: 'its done-file holds no end marker',
  ssh_auth_refused: "the instance refused berth's key",
  ssh_host_key_changed: 'the host key of the instance changed since berth first logged in: berth refuses it',
  ssh_key: "berth's SSH key cannot be used",
  ssh_unreachable: 'its SSH endpoints could not be reached',
};

/** The shell commands of a follow, for attempt n of run runId (exported for the tests). */
export function followCommands(runId: string, n: number) {
  const files = taskFilesVar(runId, n);
  // A fractional sleep where the image's sleep takes one (busybox, coreutils), else a second.
  const nap = 'sleep 0.2 2>/dev/null || sleep 1';
  // The marker, the out-file's size (an empty line where it cannot be read), then the daemon's
  // word: `ack` writes the `.ack`; anything else, or its login gone (end-of-file), writes nothing.
  const fin =
    `berth_fin() { echo "$1"; wc -c 2>/dev/null <"$berth_f.out" || echo; ` +
    `IFS= read -r berth_a <&3 && [ "$berth_a" = ack ] && ${ACK_WRITE}; }`;
  return {
    watch:
      `${files}; exec 3<&0; ${fin}; ` +
      `if ! tail -s 0.2 -n +1 -F "$berth_f.done" 2>/dev/null | { IFS= read -r berth_l && { berth_fin "$berth_l"; true; }; }; then ` +
      `until [ -f "$berth_f.done" ] && [ -s "$berth_f.done" ]; do ${nap}; done; IFS= read -r berth_l <"$berth_f.done"; berth_fin "$berth_l"; fi`,
    /**
     * A look at the task while its done-file is not there: `done` (it is), `running` (the task's
     * process, its `.pid`, is there), `gone` (it is not, or the temp directory cannot be written:
     * no done-file will come), `waiting` (no pid yet: onstart still runs, or a wrapper older than
     * the `.pid`). `kill -0` or /proc: a process of another user is there all the same.
     */
    check:
      `${files}; if [ -f "$berth_f.done" ] && [ -s "$berth_f.done" ]; then echo done; ` +
      `elif { IFS= read -r berth_p <"$berth_f.pid"; } 2>/dev/null && [ -n "$berth_p" ]; then ` +
      `if kill -0 "$berth_p" 2>/dev/null || [ -d "/proc/$berth_p" ]; then echo running; else echo gone; fi; ` +
      `elif [ -w "$berth_d" ]; then echo waiting; else echo gone; fi`,
    /** What the watch's standard input takes once the daemon holds every byte of the out-file. */
    ack: 'ack\n',
    // `.att`: a daemon follows; the wrapper's self-stop then waits for its `.ack` (src/job-spec/task-script.ts).
    stream: (offset: number) =>
      `${files}; : >"$berth_f.att"; while [ ! -f "$berth_f.out" ]; do ${nap}; done; echo berth-follow; exec tail -c +${offset + 1} -f "$berth_f.out"`,
    drain: (offset: number) => `${files}; if [ -f "$berth_f.out" ]; then tail -c +${offset + 1} "$berth_f.out"; fi; ${ACK_WRITE}`,
  };
}

/** Lines stored, bytes `from` to `to` of the out-file, scrubbed. */
interface Published {
  from: number;
  to: number;
  text: string;
}

/** A write with no group commit: done now. */
function atOnce(write: () => void): Promise<void> {
  try {
    write();
    return Promise.resolve();
  } catch (err) {
    return Promise.reject(err as Error);
  }
}

/** The follow of one attempt, from its first login to its end or the run's. */
class Follow {
  /** The byte after the last one stored. */
  private offset = 0;
  private tail: string | null = null;
  /** Bytes read after `offset`: complete lines first, then at most one unfinished (bounded: ./followed-lines.ts). */
  private readonly lines = new FollowedLines();
  private flushTimer: Timer | undefined;
  /** Told each time the stream hands something over, or ends (a task's end waiting for its last bytes). */
  private onTaken: (() => void) | undefined;
  /** The stream runs: `berth logs` reads what it kept. */
  streaming = false;
  /** Logged in now. */
  up = false;
  /** No login has been tried to the end yet. */
  firstTry = true;
  /** When the follow began (the clock's now). */
  readonly startedAt: number;
  private said = false;
  private unreachableSince: number | null = null;
  readonly stop = new AbortController();

  constructor(
    readonly target: FollowTarget,
    private readonly deps: TaskFollowDeps,
  ) {
    this.startedAt = deps.clock.now();
  }

  /** Logged in, or its first login still being tried (for at most FIRST_LOGIN_CLAIM_MS): the probe leaves it alone. */
  claimed(): boolean {
    return this.up || (this.firstTry && this.deps.clock.now() - this.startedAt < FIRST_LOGIN_CLAIM_MS);
  }

  async run(): Promise<void> {
    const { clock } = this.deps;
    const signal = this.stop.signal;
    ({ offset: this.offset, tail: this.tail } = this.deps.stored(this.target));
    let retryMs = RETRY_FIRST_MS;
    while (!signal.aborted) {
      let shell: TaskShell | undefined;
      try {
        shell = await this.deps.shells.open(this.target, signal);
        this.up = true;
        this.unreachableSince = null;
        if (await this.session(shell, signal)) return;
        retryMs = RETRY_FIRST_MS;
      } catch (err) {
        if (signal.aborted) return;
        const { why, code } = whyOf(err);
        this.deps.log.info(
          { runId: this.target.runId, attempt: this.target.n, instanceId: this.target.instanceId, err: toRunError(err) },
          `attempt #${this.target.n}: the SSH follow of instance ${this.target.instanceId} failed (${code})`,
        );
        if (why === 'refused') return this.fallBack(code);
        if (why === 'unreachable') {
          this.unreachableSince ??= clock.now();
          if (clock.now() - this.unreachableSince >= UNREACHABLE_SAY_MS) this.fallBack(code);
        }
      } finally {
        this.streaming = false;
        this.up = this.firstTry = false;
        this.flushNow();
        // An unfinished line is read again from its start.
        this.lines.clear();
        shell?.close();
      }
      await clock.sleep(retryMs, signal).catch(() => undefined);
      retryMs = Math.min(RETRY_MAX_MS, retryMs * 2);
    }
  }

  /** The logs path reads this task from now on: said once per attempt. */
  private fallBack(code: string): void {
    if (this.said) return;
    this.said = true;
    const { n, instanceId } = this.target;
    this.deps.say(
      this.target,
      `attempt #${n}: ${SAY[code] ?? `SSH failed (${code})`}; its task's output and end are read through the service's logs endpoint`,
      { n, instanceId, code },
    );
  }

  /**
   * One login: the watch and the stream until the done-file is read (true: the task ended, its end
   * sent), or the task is found gone without one (true: handed to the logs path), or the login
   * fails (throws).
   */
  private async session(shell: TaskShell, signal: AbortSignal): Promise<boolean> {
    const cmds = followCommands(this.target.runId, this.target.n);
    const streamStop = new AbortController();
    const onAbort = () => streamStop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let header = Buffer.alloc(0);
    let headerSeen = false;
    let streamOver = false;
    const stream = shell
      .exec(cmds.stream(this.offset), {
        signal: streamStop.signal,
        onStdout: (chunk) => {
          // What a stream stopped for the drain (or dropped) still hands over is read again from the offset.
          if (streamStop.signal.aborted) return;
          if (headerSeen) this.take(chunk);
          else {
            header = Buffer.concat([header, chunk]);
            if (header.length < STREAM_HEADER.length) return;
            headerSeen = true;
            this.streaming = true;
            this.take(header.subarray(STREAM_HEADER.length));
          }
          this.onTaken?.();
        },
      })
      .then(
        // It ended by itself (no `tail` in the image): the probe reads the output; the watch goes on.
        () => {
          this.streaming = false;
          streamOver = true;
          this.onTaken?.();
        },
        (err: unknown) => {
          this.streaming = false;
          streamOver = true;
          this.onTaken?.();
          if (!streamStop.signal.aborted) throw err;
        },
      );
    const watchStop = new AbortController();
    const onAbortWatch = () => watchStop.abort();
    signal.addEventListener('abort', onAbortWatch, { once: true });
    // The watch's standard input: `ack` once every byte is here, end-of-file otherwise.
    const word = new PassThrough();
    const looksStop = new AbortController();
    const onAbortLooks = () => looksStop.abort();
    signal.addEventListener('abort', onAbortLooks, { once: true });
    try {
      // What the watch printed: at most WATCH_MAX bytes, each chunk looked at once.
      let text = '';
      let newlines = 0;
      let watchOver: Promise<unknown> = Promise.resolve();
      // The marker and the out-file's size: two lines (the watch then waits for its word).
      const watched = new Promise<'watched'>((resolve, reject) => {
        watchOver = shell.exec(cmds.watch, {
          signal: watchStop.signal,
          stdin: word,
          onStdout: (chunk) => {
            if (newlines >= 2 || text.length >= WATCH_MAX) return;
            text += chunk.subarray(0, WATCH_MAX - text.length).toString('latin1');
            for (let i = chunk.indexOf(0x0a); i >= 0 && newlines < 2; i = chunk.indexOf(0x0a, i + 1)) newlines++;
            if (newlines >= 2 || text.length >= WATCH_MAX) resolve('watched');
          },
        });
        watchOver.then(() => resolve('watched'), reject);
      });
      // Meanwhile the task is looked at: gone without a done-file, it is the logs path's.
      const gone = this.untilGone(shell, cmds.check, looksStop.signal).then(
        () => 'gone' as const,
        () => new Promise<never>(() => undefined),
      );
      // The first failure of either is the session's (a dropped connection fails both).
      const first = await Promise.race([watched, gone, stream.then(() => new Promise<never>(() => undefined))]);
      const [line = '', sizeLine = ''] = text.split('\n');
      const end = first === 'watched' ? taskEndOf(line, this.target.runId, this.target.n) : null;
      if (!end) {
        // No end to read over SSH (none will come, or what is there is not one): the logs path
        // reads the task's end from its log, where the wrapper printed it, from the probe's next tick.
        const code = first === 'gone' ? 'task_gone' : 'no_marker';
        this.deps.log.info(
          { runId: this.target.runId, attempt: this.target.n, instanceId: this.target.instanceId, code },
          `attempt #${this.target.n}: no end to read over SSH on instance ${this.target.instanceId} (${code}); the logs path reads it`,
        );
        this.fallBack(code);
        return true;
      }
      // The out-file's size, where the image's `wc` read it: the stream's last bytes are waited for.
      const size = /^\s*\d+\s*$/.test(sizeLine) ? Number(sizeLine) : null;
      const caughtUp = size !== null && (await this.waitForStream(size, () => streamOver, signal));
      streamStop.abort();
      await stream.catch(() => undefined);
      this.streaming = false;
      if (!caughtUp) {
        word.end();
        watchStop.abort();
        await shell.exec(cmds.drain(this.offset + this.lines.readBytes), { signal, onStdout: (chunk) => this.take(chunk) });
      }
      const nothingRead = this.offset + this.lines.readBytes === 0;
      // Nothing read (an image without tee or tail, or a task that printed nothing): nothing to
      // keep from the out-file, so the wrapper may stop its instance at once; its log's last lines
      // are read once, to keep its output.
      if (nothingRead && caughtUp) word.end(cmds.ack);
      if (nothingRead) await this.deps.keepLog?.(this.target, signal).catch(() => undefined);
      this.deps.log.info(
        { runId: this.target.runId, attempt: this.target.n, instanceId: this.target.instanceId, exitCode: end.exitCode },
        `attempt #${this.target.n}: its task ended (exit ${end.exitCode}), as its done-file on instance ${this.target.instanceId} says`,
      );
      // The task is over: its last line is complete without a newline, and the end marker follows
      // it, in the same write as the run's end of the task, one commit with the other tasks ending
      // now. Should that commit fail, the follow logs in again from what the store holds.
      // The last lines go to live watchers once stored for good (a failed commit would show them twice).
      const kept: { offset: number; tail: string | null; held: HeldLines } = {
        offset: this.offset,
        tail: this.tail,
        held: this.lines.snapshot(),
      };
      let last: Published | null = null;
      try {
        await (this.deps.commitEnd ?? atOnce)(() => {
          if (!nothingRead) last = this.keep(true, line.trim());
          this.deps.ended(this.target.runId, this.target.n, end);
        });
      } catch (err) {
        ({ offset: this.offset, tail: this.tail } = kept);
        this.lines.restore(kept.held);
        throw err;
      }
      this.publish(last);
      // Kept: the wrapper may stop its instance now (its GPU stops billing; its log stays readable).
      if (!nothingRead && caughtUp) word.end(cmds.ack);
      // The login stays until the watch has written the `.ack` (bounded: the destroy is on its way).
      if (caughtUp) await this.within(watchOver, ACK_WAIT_MS, signal);
      return true;
    } finally {
      word.end();
      streamStop.abort();
      watchStop.abort();
      looksStop.abort();
      signal.removeEventListener('abort', onAbort);
      signal.removeEventListener('abort', onAbortWatch);
      signal.removeEventListener('abort', onAbortLooks);
    }
  }

  /**
   * Resolves once GONE_LOOKS looks in a row, CHECK_MS apart, found the task's process gone and no
   * done-file; rejects when `signal` fires. A look that fails (a drop: the watch fails too) is no answer.
   */
  private async untilGone(shell: TaskShell, command: string, signal: AbortSignal): Promise<void> {
    let gone = 0;
    while (gone < GONE_LOOKS) {
      await this.deps.clock.sleep(CHECK_MS, signal);
      let out = '';
      const said = await shell
        .exec(command, { signal, onStdout: (chunk) => void (out.length < 64 && (out += chunk.toString('latin1'))) })
        .then(
          () => out.trim(),
          () => null,
        );
      if (signal.aborted) throw new Error('aborted');
      if (said !== null) gone = said === 'gone' ? gone + 1 : 0;
    }
  }

  /**
   * Whether the stream has handed over the out-file up to `size` bytes, waiting at most
   * CATCH_UP_MS; false at once when it is over (a drop, no `tail`).
   */
  private waitForStream(size: number, over: () => boolean, signal: AbortSignal): Promise<boolean> {
    const has = () => this.offset + this.lines.readBytes >= size;
    if (has()) return Promise.resolve(true);
    if (over() || signal.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const finish = (ok: boolean) => {
        timer.cancel();
        this.onTaken = undefined;
        signal.removeEventListener('abort', onAbort);
        resolve(ok);
      };
      const onAbort = () => finish(false);
      const timer = this.deps.clock.setTimer(() => finish(false), CATCH_UP_MS);
      signal.addEventListener('abort', onAbort, { once: true });
      this.onTaken = () => {
        if (has()) finish(true);
        else if (over()) finish(false);
      };
    });
  }

  /** Waits for `work` to settle, `ms` at most (on the clock), or the signal. Never rejects. */
  private within(work: Promise<unknown>, ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const finish = () => {
        timer.cancel();
        signal.removeEventListener('abort', finish);
        resolve();
      };
      const timer = this.deps.clock.setTimer(finish, ms);
      signal.addEventListener('abort', finish, { once: true });
      work.then(finish, finish);
    });
  }

  /** Output read: held until its lines are complete, then written within FLUSH_MS. */
  private take(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.lines.push(chunk);
    if (this.lines.heldBytes >= PENDING_MAX) return this.flushNow();
    this.flushTimer ??= this.deps.clock.setTimer(() => {
      this.flushTimer = undefined;
      this.flushNow();
    }, FLUSH_MS);
  }

  /** Writes the complete lines held, within FLUSH_MS of their coming; a write that fails is tried at the next flush. */
  private flushNow(): void {
    try {
      this.publish(this.keep());
    } catch (err) {
      // Kept for the next flush: the offset stays where the store has it.
      this.deps.log.warn({ runId: this.target.runId, err: toRunError(err) }, 'the followed output of a task could not be stored');
    }
  }

  /**
   * Stores the complete lines held (all of it when `all`), with the offset after them; with the
   * task's end `marker`, that too, after them as the container's log shows it (a blank line, then
   * the marker). Throws what the store throws, having changed nothing; returns the lines stored,
   * for the run's live watchers.
   */
  private keep(all = false, marker?: string): Published | null {
    this.flushTimer?.cancel();
    this.flushTimer = undefined;
    const held = this.lines.snapshot();
    // A line longer than LINE_MAX comes cut, with a mark (./followed-lines.ts): held output stays bounded.
    const taken = this.lines.take(all);
    if (taken === null && marker === undefined) return null;
    const cut = taken?.bytes ?? 0;
    const offset = this.offset + cut;
    const scrubbed = taken === null || taken.text === '' ? '' : this.deps.scrub(this.target, taken.text);
    let tail = scrubbed === '' ? this.tail : keptTail(this.tail === null ? scrubbed : `${this.tail}\n${scrubbed}`, false);
    if (marker !== undefined) tail = keptTail(tail === null ? marker : `${tail}\n\n${marker}`, false);
    try {
      this.deps.save(this.target, { offset, tail: tail ?? '' });
    } catch (err) {
      this.lines.restore(held);
      throw err;
    }
    const stored = scrubbed !== '' ? { from: this.offset, to: offset, text: scrubbed } : null;
    this.offset = offset;
    this.tail = tail;
    return stored;
  }

  /** Lines stored, to the run's live watchers. */
  private publish(lines: Published | null): void {
    if (lines) this.deps.output?.(this.target, lines.from, lines.to, lines.text);
  }
}

export class TaskFollow {
  private readonly follows = new Map<string, Follow>();
  /** Attempts whose follow ended for good (refused, or their task's end sent): not followed again. */
  private readonly done = new Set<string>();
  private readonly loop: PeriodicLoop;

  constructor(private readonly deps: TaskFollowDeps) {
    this.loop = new PeriodicLoop({
      clock: deps.clock,
      run: () => this.tick(),
      intervalMs: TICK_MS,
      onError: (err) => deps.log.warn({ err: toRunError(err) }, 'a task follow round failed'),
    });
  }

  start(): void {
    this.loop.start(0);
  }

  stop(): void {
    this.loop.stop();
    for (const f of this.follows.values()) f.stop.abort();
    this.follows.clear();
  }

  /**
   * Whether the attempt is followed over SSH now (logged in, or attaching for the first time): the
   * task probe leaves it alone. False from a failure until a login works again.
   */
  followed(t: { runId: string; n: number }): boolean {
    return this.follows.get(keyOf(t))?.claimed() === true;
  }

  /** Whether the attempt's output is streamed now: `berth logs` reads what was kept of it, not the service. */
  streaming(t: { runId: string; n: number }): boolean {
    return this.follows.get(keyOf(t))?.streaming === true;
  }

  /** One round: follows started for new targets (within `max`), ended for those no longer running. */
  tick(): void {
    const live = new Map<string, FollowTarget>();
    for (const t of this.deps.targets()) live.set(keyOf(t), t);
    for (const [key, f] of this.follows) {
      const t = live.get(key);
      if (t && t.instanceId === f.target.instanceId) continue;
      f.stop.abort();
      this.follows.delete(key);
    }
    for (const key of this.done) if (!live.has(key)) this.done.delete(key);
    for (const [key, t] of live) {
      if (this.follows.size >= this.deps.max) break;
      if (this.follows.has(key) || this.done.has(key)) continue;
      const f = new Follow(t, this.deps);
      this.follows.set(key, f);
      void f
        .run()
        .catch((err: unknown) => this.deps.log.warn({ runId: t.runId, err: toRunError(err) }, 'a task follow failed'))
        .finally(() => {
          if (this.follows.get(key) !== f) return;
          this.follows.delete(key);
          if (!f.stop.signal.aborted) this.done.add(key);
        });
    }
  }
}

function keyOf(t: { runId: string; n: number }): string {
  return `${t.runId}:${t.n}`;
}
