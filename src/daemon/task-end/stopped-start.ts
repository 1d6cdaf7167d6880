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
}

/** Starts the instance and waits until berth can log in, until `until`; resolves with why not, or null once it can. */
export async function startStopped(
  deps: StoppedStartDeps,
  t: { runId: string; n: number; instanceId: number; until: number },
  signal: AbortSignal,
): Promise<string | null> {
  const { clock } = deps;
  try {
    await deps.start(t.instanceId, signal);
  } catch (err) {
    return `it could not be started again (${(err as Error).message})`;
  }
  for (;;) {
    if (signal.aborted) return 'stopped while it was started again';
    const seen = await deps.lookAt(t.instanceId, clock.now(), signal).catch(() => null);
    const status = seen?.actual_status ?? 'not listed';
    if (status === 'running') {
      try {
        (await deps.shells.open(t, signal)).close();
        return null;
      } catch {
        // sshd not up yet: looked at again below.
      }
    }
    if (clock.now() + deps.lookEveryMs >= t.until) return `it was started again but was ${status} when its time ran out`;
    await clock.sleepUntil(clock.now() + deps.lookEveryMs, signal).catch(() => undefined);
  }
}
