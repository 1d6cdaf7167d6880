// An instance its task stopped before berth took its outputs (issue #48 item 2: the daemon was away
// at the task's end, the wrapper waited files.outputs_timeout_s for it, then stopped its instance,
// disk kept) is started again so they can be downloaded: the client's start (manage_instance
// `{"state": "running"}`, the same PUT the official client's `start instance` sends; a 200 with
// `success: false` is an error there), then the shared lists until it shows running, then a login
// until sshd lets berth in. The container's wrapper, started again, finds its done-file and waits
// for the daemon's `.got` once more (src/job-spec/task-script.ts), so the task never runs twice.
// Bounded by the collection's deadline; an instance that does not come up by then is left to the
// machine (the outputs are `failed`, saying why).
import type { Instance } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import type { FileShells } from './task-shells.js';

export interface StoppedStartDeps {
  clock: Clock;
  start(instanceId: number, signal: AbortSignal): Promise<void>;
  /** One list showing the instance, taken after `after` (the shared lists); null: not listed. */
  lookAt(instanceId: number, after: number, signal: AbortSignal): Promise<Instance | null>;
  shells: FileShells;
  /** Between two looks, ms (a poll interval). */
  lookEveryMs: number;
  /** Between two starts of an instance that stays stopped, ms. */
  retryEveryMs: number;
  /** Tells the user, once, that the instance is kept stopped (an event on the run). */
  keptStopped(why: string): void;
}

/**
 * Starts the instance and waits until berth can log in; a start refused or queued (it stays
 * stopped) is sent again every `retryEveryMs`, the instance kept stopped (its disk billing) until
 * `keepUntil` (files.stopped_keep_s), and the user told once. Resolves with why not, or null once
 * berth can log in.
 */
export async function startStopped(
  deps: StoppedStartDeps,
  t: { runId: string; n: number; instanceId: number; keepUntil: number },
  signal: AbortSignal,
): Promise<string | null> {
  const { clock } = deps;
  let told = false;
  for (;;) {
    let why: string;
    try {
      await deps.start(t.instanceId, signal);
      why = 'it stayed stopped after a start (queued, or the machine has no free GPU)';
    } catch (err) {
      why = `its start was refused (${(err as Error).message})`;
    }
    const nextStart = Math.min(clock.now() + deps.retryEveryMs, t.keepUntil);
    for (;;) {
      if (signal.aborted) return 'stopped while it was started again';
      const seen = await deps.lookAt(t.instanceId, clock.now(), signal).catch(() => null);
      if (seen?.actual_status === 'running') {
        try {
          (await deps.shells.open(t, signal)).close();
          return null;
        } catch {
          // sshd not up yet: looked at again below.
        }
        why = 'it runs again, but berth could not log in yet';
      } else if (!told && seen !== null) {
        // Listed stopped after a start: the user hears at once that it is kept, not lost.
        told = true;
        deps.keptStopped(why);
      }
      if (clock.now() >= nextStart) break;
      await clock.sleepUntil(Math.min(clock.now() + deps.lookEveryMs, nextStart), signal).catch(() => undefined);
    }
    if (clock.now() >= t.keepUntil) return `${why}, until files.stopped_keep_s passed`;
  }
}
