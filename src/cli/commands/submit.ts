// `berth submit FILE [--wait] [--json] [--idempotency-key K]`: validate locally (an invalid spec is
// never sent), submit, print the run id; with --wait follow the run until it runs or ends (a task:
// its lines as they come, then its end, exiting with the task's exit code).
import { dirname, resolve } from 'node:path';
import { loadConfig } from '../../config/load.js';
import { ControlApiError, connectToDaemon, type ControlClient } from '../control-client.js';
import { EXIT, exitCodeForRun, exitCodeForTask } from '../exit-codes.js';
import { watchRun } from '../follow.js';
import { printJson, type Io } from '../io.js';
import { followOutput } from '../output-follow.js';
import { outputsMissingSentence, runEndedSentence, sshCommand } from '../render.js';
import { isEndState, isSettled } from '../../wire/run-states.js';
import type { Run } from '../../wire/control-api.js';
import { checkGpuNames } from '../gpu-name-list.js';
import { placeIssuesInFile, readSpecFile, SpecFileError } from '../spec-file.js';
import { megabytes, packWorkdir, WorkdirError } from '../workdir-pack.js';

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
  const sent = await withWorkdir(file, spec, client, io, env);
  const run = await client.submit(sent, options.idempotencyKey).catch((err: unknown) => {
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
  const output = task && !options.json ? new TaskOutput(client, run.id, io) : undefined;
  const settled = await watchRun(client, run, io, (r) => (task ? isEndState(r.state) && output?.done !== false : isSettled(r.state)), {
    quiet: options.json,
    onRun: (r, log) => output?.onRun(r, log),
  }).finally(() => output?.stop());
  return task
    ? reportTaskEnd(settled, io, options.json === true, output?.started === true)
    : reportSettled(settled, io, options.json === true);
}

/**
 * A task's lines under `submit --wait` (issue #50), printed as they come above the progress line:
 * followed as `berth logs --follow` does (../output-follow.ts) from the first view of the run that
 * holds an instance in a state the task may have run in, so no log read is spent while it is
 * queued or booting. The wait ends once the follow has printed the end's last lines.
 */
class TaskOutput {
  private follow: Promise<unknown> | undefined;
  private seenEnd!: () => void;
  private readonly ended = new Promise<void>((resolve) => (this.seenEnd = resolve));
  private readonly stopped = new AbortController();
  /** The follow has read the run's end and printed its last lines (or failed, and said so). */
  done: boolean | undefined;

  constructor(
    private readonly client: ControlClient,
    private readonly runId: string,
    private readonly io: Io,
  ) {}

  /** The wait is over (the run ended, or the user stopped following): no more reads. */
  stop(): void {
    this.stopped.abort();
  }

  get started(): boolean {
    return this.follow !== undefined;
  }

  onRun(run: Run, log: (line: string) => void): void {
    if (isEndState(run.state)) this.seenEnd();
    if (this.follow !== undefined) return;
    const ranIn = ['running', 'collecting', 'destroying'].includes(run.state) || isEndState(run.state);
    if (!ranIn || run.attempts.every((a) => a.instance_id === null)) return;
    this.done = false;
    this.follow = followOutput(this.client, this.runId, {
      tail: TASK_LOG_LINES,
      print: (lines) => lines.forEach(log),
      note: (text) => this.io.err(text),
      ended: this.ended,
      signal: this.stopped.signal,
    })
      .catch((err: unknown) => {
        if (!this.stopped.signal.aborted)
          this.io.err(`(the task's output could not be followed: ${err instanceof Error ? err.message : String(err)})`);
      })
      .finally(() => (this.done = true));
  }
}

/**
 * A spec with a `workdir`: the directory (relative to the spec file) packed, put in the daemon's
 * store by its sha256, and named by the spec sent (`workdir_sha256`). Too large, or not a
 * directory: an error said of the spec's `workdir` (exit 2), and nothing is sent.
 */
async function withWorkdir(file: string, spec: unknown, client: ControlClient, io: Io, env: NodeJS.ProcessEnv): Promise<unknown> {
  const workdir = (spec as { workdir?: unknown }).workdir;
  if (typeof workdir !== 'string') return spec;
  // The cap this BERTH_HOME's config sets (the daemon checks its own again when the archive comes).
  const maxMb = loadConfig({}, env).config.files.workdir_max_mb;
  const dir = resolve(dirname(file), workdir);
  let packed;
  try {
    packed = await packWorkdir(dir, maxMb);
  } catch (err) {
    if (err instanceof WorkdirError) throw new SpecFileError(file, placeIssuesInFile(file, [{ path: '$.workdir', message: err.message }]));
    throw err;
  }
  try {
    await client.putBlob(packed.sha256, packed.archive);
  } catch (err) {
    // The daemon's cap (its own config): said of the spec's workdir too.
    if (err instanceof ControlApiError && err.kind === 'too_large')
      throw new SpecFileError(file, [{ path: '$.workdir', message: err.message }]);
    throw err;
  }
  io.err(`Packed workdir ${dir}: ${packed.files} files, ${megabytes(packed.bytes)} (${megabytes(packed.archive.length)} packed).`);
  for (const w of packed.warnings) io.err(`Warning: ${w}.`);
  return { ...(spec as Record<string, unknown>), workdir_sha256: packed.sha256 };
}

/** How a task's run ended: the last lines of its log (unless they were followed), and the task's exit code as the CLI's. */
function reportTaskEnd(run: Run, io: Io, json: boolean, followed: boolean): number {
  if (json) printJson(io, run);
  else if (!followed) {
    const last = [...run.attempts].reverse().find((a) => a.logs);
    if (last?.logs) io.out(`Last lines of attempt #${last.n}:\n${last.logs.split('\n').slice(-TASK_LOG_LINES).join('\n')}`);
  }
  // Outputs not all taken: said last, and a success exits 5, never 0 (issue #48).
  const missing = outputsMissingSentence(run);
  if (run.state === 'succeeded') {
    if (!json) io.out(`Run ${run.id} succeeded: the task exited with code 0; nothing is billing.`);
    if (!missing) return EXIT.ok;
    io.err(missing);
    return EXIT.outputsMissing;
  }
  io.err(runEndedSentence(run));
  if (missing) io.err(missing);
  return exitCodeForTask(run);
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
