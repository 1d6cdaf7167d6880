// The workdir uploads (issue #40 item 1): every attempt of a task with a workdir gets it in its
// container once its instance runs and berth can log in (berth's key, the direct address then the
// proxy, the host key pinned with the attempt: ../task-end/task-shells.ts), before its task starts.
// The upload itself is ./workdir-upload.ts; here: which attempts, when, tried again how, and said how.
//
// States of an attempt's upload: waiting (not running yet, or between tries) → uploading → done
// (the ready-file holds the hash: its task may start) or given up. Left:
//   - done: said once in the run's events (`workdir.uploaded`: the bytes and the seconds, GPU time,
//     since the instance bills while it is listed running); a restarted daemon finds the ready-file
//     there already and says nothing again;
//   - a dropped login, an unreachable address, an SFTP failure: tried again with backoff
//     (RETRY_FIRST_MS doubling to RETRY_MAX_MS) while the attempt runs;
//   - a refused key, a changed host key, a key berth cannot use, an archive the store no longer
//     holds or that fails its hash: given up, said once (`workdir.upload_failed`), and the attempt
//     told at once (`givenUp`): its task never started, so its instance goes now and the run fails
//     over, instead of billing until the wrapper's files.upload_timeout_s.
// A workdir that never arrives otherwise is the wrapper's to say (its marker's `stage=workdir`
// after files.upload_timeout_s), and the run fails over as for any end
// (src/job-spec/task-script.ts); the task never starts without its code.
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { PeriodicLoop } from '../../periodic-loop.js';
import type { FollowTarget } from '../task-end/task-follow.js';
import { uploadWorkdir, type UploadMethod, type UploadSession } from './workdir-upload.js';

const TICK_MS = 1000;
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

/** A login to an attempt's instance, closed by the caller. */
type UploadLogin = UploadSession & { close(): void };

export interface WorkdirUploadsDeps {
  clock: Clock;
  log: Logger;
  /** The task attempts whose instance runs now (asked every tick). */
  targets(): FollowTarget[];
  /** The run's workdir: its hash and the container directory it goes to; null without one. */
  workdirOf(runId: string): { sha256: string; dir: string } | null;
  /** The packed workdir from the store, or null when it holds none under this hash. */
  archive(sha256: string): Buffer | null;
  login(t: FollowTarget, signal: AbortSignal): Promise<UploadLogin>;
  /** One event on the run. */
  say(t: FollowTarget, type: 'workdir.uploaded' | 'workdir.upload_failed', message: string, data: Record<string, unknown>): void;
  /** The upload was given up (`why`: its error code): the attempt's task never starts, so its instance goes at once. */
  givenUp(t: FollowTarget, why: string): void;
  /** How long one try may take, ms (files.upload_timeout_s: the wrapper waits no longer). */
  timeoutMs: number;
}

/** Errors after which another try cannot do better for this attempt. */
const FINAL = new Set(['ssh_auth_refused', 'ssh_host_key_changed', 'ssh_key', 'store']);

export class WorkdirUploads {
  private readonly loop: PeriodicLoop;
  /** Uploads in flight, by attempt: their stop. */
  private readonly inFlight = new Map<string, AbortController>();
  /** Attempts done or given up: not tried again while they run. */
  private readonly done = new Set<string>();

  constructor(private readonly deps: WorkdirUploadsDeps) {
    this.loop = new PeriodicLoop({
      clock: deps.clock,
      run: () => this.tick(),
      intervalMs: TICK_MS,
      onError: (err) => deps.log.warn({ err: toRunError(err) }, 'a workdir upload round failed'),
    });
  }

  start(): void {
    this.loop.start(0);
  }

  stop(): void {
    this.loop.stop();
    for (const c of this.inFlight.values()) c.abort();
    this.inFlight.clear();
  }

  /** One round: an upload started for each running attempt that needs one; those no longer running stopped. */
  tick(): void {
    const live = new Map<string, FollowTarget>();
    for (const t of this.deps.targets()) live.set(keyOf(t), t);
    for (const [key, stop] of this.inFlight) {
      if (live.has(key)) continue;
      stop.abort();
      this.inFlight.delete(key);
    }
    for (const key of this.done) if (!live.has(key)) this.done.delete(key);
    for (const [key, t] of live) {
      if (this.inFlight.has(key) || this.done.has(key)) continue;
      const workdir = this.deps.workdirOf(t.runId);
      if (!workdir) continue;
      const stop = new AbortController();
      this.inFlight.set(key, stop);
      void this.run(t, workdir, stop.signal).finally(() => {
        if (this.inFlight.get(key) !== stop) return;
        this.inFlight.delete(key);
        if (!stop.signal.aborted) this.done.add(key);
      });
    }
  }

  /** Tries until the workdir is there, the attempt no longer runs, or a try cannot do better. */
  private async run(t: FollowTarget, workdir: { sha256: string; dir: string }, signal: AbortSignal): Promise<void> {
    const { clock, log } = this.deps;
    const ctx = { runId: t.runId, attempt: t.n, instanceId: t.instanceId };
    for (let retryMs = RETRY_FIRST_MS; !signal.aborted; retryMs = Math.min(RETRY_MAX_MS, retryMs * 2)) {
      const startedAt = clock.now();
      try {
        const archive = this.deps.archive(workdir.sha256);
        if (!archive) throw Object.assign(new Error(`the store holds no workdir archive ${workdir.sha256}`), { code: 'store' });
        const method = await this.once(t, { ...workdir, archive }, signal);
        if (method === 'present') {
          log.info(ctx, `attempt #${t.n}: the workdir is already on instance ${t.instanceId}`);
          return;
        }
        const seconds = Math.round((clock.now() - startedAt) / 100) / 10;
        this.deps.say(
          t,
          'workdir.uploaded',
          `attempt #${t.n}: the workdir (${archive.length} bytes packed) reached instance ${t.instanceId} in ${seconds} s (${method === 'tar' ? "the image's tar" : 'SFTP, file by file'}); its GPU bills meanwhile`,
          { n: t.n, instanceId: t.instanceId, bytes: archive.length, seconds, method, sha256: workdir.sha256 },
        );
        return;
      } catch (err) {
        if (signal.aborted) return;
        const code = (err as { code?: unknown }).code;
        log.info({ ...ctx, err: toRunError(err) }, `attempt #${t.n}: the workdir upload to instance ${t.instanceId} failed`);
        if (typeof code === 'string' && FINAL.has(code)) {
          this.deps.say(
            t,
            'workdir.upload_failed',
            `attempt #${t.n}: the workdir cannot reach instance ${t.instanceId} (${code}); its task will not start, so the instance is given up now and the run fails over`,
            { n: t.n, instanceId: t.instanceId, code },
          );
          this.deps.givenUp(t, code);
          return;
        }
      }
      await clock.sleep(retryMs, signal).catch(() => undefined);
    }
  }

  /** One login, one upload, bounded by timeoutMs. */
  private async once(t: FollowTarget, up: { sha256: string; dir: string; archive: Buffer }, signal: AbortSignal): Promise<UploadMethod> {
    const late = new AbortController();
    const timer = this.deps.clock.setTimer(
      () => late.abort(new Error('the workdir upload took longer than files.upload_timeout_s')),
      this.deps.timeoutMs,
    );
    const bounded = AbortSignal.any([signal, late.signal]);
    let login: UploadLogin | undefined;
    try {
      login = await this.deps.login(t, bounded);
      return await uploadWorkdir(login, up, bounded);
    } finally {
      timer.cancel();
      login?.close();
    }
  }
}

function keyOf(t: { runId: string; n: number }): string {
  return `${t.runId}:${t.n}`;
}
