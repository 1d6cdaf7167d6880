// `berth submit FILE [--wait] [--json] [--idempotency-key K]`: validate locally (an invalid spec is
// never sent), submit, print the run id; with --wait follow the run until it runs or ends.
import { ControlApiError, connectToDaemon } from '../control-client.js';
import { EXIT, exitCodeForRun } from '../exit-codes.js';
import { watchRun } from '../follow.js';
import { printJson, type Io } from '../io.js';
import { runEndedSentence, sshCommand } from '../render.js';
import { isEndState, isSettled } from '../../wire/run-states.js';
import type { Run } from '../../wire/control-api.js';
import { checkGpuNames } from '../gpu-name-list.js';
import { readSpecFile, SpecFileError } from '../spec-file.js';

export interface SubmitOptions {
  wait?: boolean;
  json?: boolean;
  idempotencyKey?: string;
  /** `--set PATH=VALUE` overrides (./spec-overrides.ts). */
  set?: string[];
}

export async function submitCommand(file: string, options: SubmitOptions, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const spec = readSpecFile(file, options.set ?? []);
  await checkGpuNames(file, spec, io, env);
  const client = connectToDaemon(env);
  const run = await client.submit(spec, options.idempotencyKey).catch((err: unknown) => {
    // The daemon validates again (its defaults may differ): report its problems the same way.
    if (err instanceof ControlApiError && err.kind === 'spec') {
      throw new SpecFileError(file, err.issues.length > 0 ? err.issues : [{ path: '$', message: err.message }]);
    }
    throw err;
  });

  const asked = (spec as { name?: unknown }).name;
  if (typeof asked === 'string' && run.name !== asked)
    io.err(`A live run is already named "${asked}": this one is named "${run.name}" (berth status ${run.name}).`);
  if (!options.wait) {
    if (options.json) printJson(io, run);
    else io.out(run.id);
    return EXIT.ok;
  }
  // A task's run is followed to its end: `running` is only the task under way.
  const { task } = run;
  const until = task ? 'it ends' : 'it runs';
  if (!options.json) io.out(`Submitted run ${run.id} (${run.name}); following it until ${until} (Ctrl-C stops following, not the run).`);
  const settled = await watchRun(client, run, io, (r) => (task ? isEndState(r.state) : isSettled(r.state)), { quiet: options.json });
  return task ? reportTaskEnd(settled, io, options.json === true) : reportSettled(settled, io, options.json === true);
}

/** How a task's run ended: its exit code and the last lines of its log; exit 0 only when it succeeded. */
function reportTaskEnd(run: Run, io: Io, json: boolean): number {
  if (json) printJson(io, run);
  else {
    const last = [...run.attempts].reverse().find((a) => a.logs);
    if (last?.logs) io.out(`Last lines of attempt #${last.n}:\n${last.logs.split('\n').slice(-TASK_LOG_LINES).join('\n')}`);
  }
  if (run.state === 'succeeded') {
    if (!json) io.out(`Run ${run.id} succeeded: the task exited with code 0; nothing is billing.`);
    return EXIT.ok;
  }
  io.err(runEndedSentence(run));
  return exitCodeForRun(run);
}

/** Log lines `submit --wait` prints at a task's end. */
const TASK_LOG_LINES = 20;

/** Prints where a followed run came to rest; the exit code says whether it is running. */
export function reportSettled(run: Run, io: Io, json: boolean): number {
  if (json) printJson(io, run);
  if (run.state === 'running') {
    if (!json) io.out(`Run ${run.id} is running: ${sshCommand(run.instance) ?? 'no SSH address yet'}`);
    return EXIT.ok;
  }
  io.err(runEndedSentence(run));
  return exitCodeForRun(run);
}
