// `berth cancel RUN [--wait] [--no-outputs]`: asks the daemon to stop the run and destroy its
// instances; a task with outputs is stopped and has them taken first (issue #48), unless
// --no-outputs (or a second cancel). --wait follows until the run has ended, i.e. until the service
// no longer lists any of its instances.
import { connectToDaemon } from '../control-client.js';
import { endedWords } from '../render.js';
import { EXIT } from '../exit-codes.js';
import { watchRun } from '../follow.js';
import type { Io } from '../io.js';
import { isEndState } from '../../wire/run-states.js';

export interface CancelOptions {
  wait?: boolean;
  /** Destroy at once, without taking a task's outputs first. */
  noOutputs?: boolean;
}

/**
 * How long the cancel and its --wait ride out a daemon whose store is away (a Postgres restart, a
 * failover: seconds), as the daemon itself does; the cancel is stored once the store is back.
 */
const STORE_WAIT_MS = 120_000;

export async function cancelCommand(runId: string, options: CancelOptions, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  let told = false;
  const client = connectToDaemon(env, {
    storeWaitMs: STORE_WAIT_MS,
    onStoreWait: (message) => {
      if (told) return;
      told = true;
      io.err(`${message} Trying again for up to ${STORE_WAIT_MS / 60_000} minutes.`);
    },
  });
  const run = await client.cancel(runId, { noOutputs: options.noOutputs === true });
  // An ended run whose instance was kept warm (warm.idle_s): the cancel released it (issue #51).
  if (isEndState(run.state) && run.warm?.state === 'released') {
    io.out(`Run ${run.id} ${endedWords(run.state)}; the instance it kept warm, ${run.warm.instance_id}, is being destroyed.`);
    return EXIT.ok;
  }
  if (!options.wait) {
    io.out(
      isEndState(run.state) ? `Run ${run.id} ${endedWords(run.state)}; nothing to cancel.` : `Cancelling run ${run.id} (now ${run.state}).`,
    );
    return EXIT.ok;
  }
  const ended = await watchRun(client, run, io, (r) => isEndState(r.state));
  io.out(
    ended.state === 'cancelled'
      ? `Run ${ended.id} is cancelled; it holds no instance.`
      : !isEndState(run.state) && ended.error?.kind === 'task_failed'
        ? // Its task had failed (the cancel ended a keep_on_failure_s keep): the task's outcome stands (docs/tasks.md).
          `Run ${ended.id} ended failed as its task did${ended.error.exit_code !== undefined ? ` (exit ${ended.error.exit_code})` : ''}; its instance is destroyed.`
        : `Run ${ended.id} had already ended (${ended.state}); it holds no instance.`,
  );
  return EXIT.ok;
}
