// How a run actor's failure reaches the run machine: the error as a run error, the verdict of the
// one policy table (src/client/retry-policy.ts), and when it happened. The machine reads neither
// that table nor a clock (machines/README.md), so both come with the failure.
import type { ActorFailure } from '../../../machines/run-types.js';
import { failsRun } from '../../client/retry-policy.js';
import { toRunError, type RunError } from '../../errors.js';

class RunActorFailure extends Error implements ActorFailure {
  readonly error: RunError;
  readonly fatal: boolean;
  readonly at: number;

  constructor(cause: unknown, at: number) {
    const error = toRunError(cause);
    super(error.message, { cause });
    this.name = 'RunActorFailure';
    this.error = error;
    this.fatal = failsRun(cause);
    this.at = at;
  }
}

/** Runs one actor's work; a rejection becomes a `RunActorFailure` stamped with the clock's time. */
export async function asRunActor<T>(work: () => Promise<T>, now: () => number): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw new RunActorFailure(err, now());
  }
}
