// `berth outputs RUN [DEST] [--attempt N]`: copies the outputs a task left (its spec's `outputs`,
// kept by the daemon that took them, issue #40) to DEST, through the control API, each file checked
// against the sha256 the daemon computed as it downloaded it. The files live on the host of that
// daemon: asked of a daemon on another host (a shared store), the daemon's answer names the host.
// A partial set (the size cap, a cut transfer) is copied as it is, and said on stderr. A file already
// in DEST is never replaced without --force, and no symlink inside DEST is followed (../outputs-dest.ts):
// every name is checked before the first byte is written. Names are shown escaped (../shown-name.ts).
import { resolve } from 'node:path';
import { countText } from '../../count-text.js';
import { BerthError } from '../../errors.js';
import type { RunOutputs } from '../../wire/control-api.js';
import { connectToDaemon, type ControlClient } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { printJson, type Io } from '../io.js';
import { openDestFile, planDest, type DestConflict } from '../outputs-dest.js';
import { shownName } from '../shown-name.js';
import { isEndState } from '../../wire/run-states.js';

export async function outputsCommand(
  runId: string,
  dest: string | undefined,
  options: { attempt?: string; json?: boolean; force?: boolean },
  io: Io,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const wanted = options.attempt === undefined ? undefined : Number(options.attempt);
  if (wanted !== undefined && (!Number.isInteger(wanted) || wanted < 1))
    throw new BerthError('bad_request', '--attempt must be a whole number from 1.');
  return copyOutputs(connectToDaemon(env), runId, dest, options, io, wanted);
}

/** Where the run and its files come from: the daemon's control API (a stub in the unit tests). */
export type OutputsSource = Pick<ControlClient, 'getRun' | 'downloadOutput'>;

/** The copy itself, from a run's kept outputs to DEST: nothing written unless every name can go there. */
export async function copyOutputs(
  source: OutputsSource,
  runId: string,
  dest: string | undefined,
  options: { json?: boolean; force?: boolean },
  io: Io,
  wanted: number | undefined,
): Promise<number> {
  const run = await source.getRun(runId);
  const kept = chosen(run.outputs, wanted);
  if (!kept) {
    // The real cause and its fix where the run says it (issue #48).
    const missing = run.outputs_missing;
    const why =
      run.outputs.length > 0
        ? `attempt ${wanted} took none`
        : missing
          ? `${missing.cause}; ${missing.fix}`
          : isEndState(run.state)
            ? 'none were taken (its spec names no outputs)'
            : `none yet: it is ${run.state}, and they are taken when its task ends`;
    throw new BerthError('bad_request', `Run ${run.id} has no outputs to copy: ${why}.`);
  }
  if (kept.state === 'collecting' || kept.state === 'copying')
    throw new BerthError(
      'bad_request',
      `Run ${run.id}'s outputs are still being taken (attempt ${kept.attempt}); try again once it has ended.`,
    );
  if (kept.files.length === 0) {
    const where =
      kept.state === 'copied'
        ? `they were copied to the cloud: ${kept.detail ?? ''}`
        : run.outputs_missing?.attempt === kept.attempt
          ? `${run.outputs_missing.cause}; ${run.outputs_missing.fix}`
          : `none came (${kept.detail ?? kept.state})`;
    throw new BerthError('bad_request', `Run ${run.id} keeps no output files of attempt ${kept.attempt}: ${where}.`);
  }
  const root = resolve(dest ?? `outputs-${run.id}`);
  const { paths, conflicts } = planDest(
    root,
    kept.files.map((f) => f.name),
    options.force === true,
  );
  if (conflicts.length > 0) {
    const replaceable = conflicts.every((c) => c.kind === 'exists');
    io.err(
      `Nothing of run ${run.id} was copied: ${countText(conflicts.length, 'output')} cannot go to ${root} as asked${replaceable ? ' (--force replaces those files)' : ''}:`,
    );
    for (const c of conflicts) io.err(`  ${shownName(c.name)}: ${CONFLICT[c.kind](shownName(c.path))}`);
    return EXIT.usage;
  }
  const copied: Array<{ name: string; size: number; sha256: string; partial?: true }> = [];
  for (const f of kept.files) {
    const to = paths.get(f.name)!;
    const file = openDestFile(root, to);
    let got;
    try {
      got = await source.downloadOutput(run.id, kept.attempt, f.name, file.out);
    } catch (err) {
      file.out.destroy();
      file.drop();
      throw err;
    }
    if (got.size !== f.size || got.sha256 !== f.sha256) {
      file.drop();
      throw new BerthError(
        'bad_response',
        `${shownName(f.name)} came as ${got.size} bytes with sha256 ${got.sha256}, but the daemon kept ${f.size} bytes with sha256 ${f.sha256}: not kept in ${root}.`,
      );
    }
    file.keep();
    copied.push({ name: f.name, size: got.size, sha256: got.sha256, ...(f.partial ? { partial: true as const } : {}) });
  }
  const bytes = copied.reduce((n, f) => n + f.size, 0);
  if (options.json) printJson(io, { run: run.id, attempt: kept.attempt, state: kept.state, dest: root, files: copied });
  else io.out(`Copied ${countText(copied.length, 'file')} (${bytes} bytes) of run ${run.id}, attempt ${kept.attempt}, to ${root}.`);
  if (kept.state === 'partial') io.err(`These outputs are partial: ${kept.detail ?? 'not every file came whole'}.`);
  return EXIT.ok;
}

/** What each conflict of ../outputs-dest.ts says, after the name. */
const CONFLICT: Record<DestConflict['kind'], (path: string) => string> = {
  exists: (p) => `${p} is already there`,
  not_a_file: (p) => `${p} is a folder`,
  link_in_path: (p) => `${p} is a symlink or a file, not a folder (never followed)`,
  bad_name: () => 'not a name under DEST',
  twice: () => 'listed twice by the daemon',
};

/** The attempt asked for, else the last one that kept any file, else the last one. */
function chosen(outputs: RunOutputs[], attempt: number | undefined): RunOutputs | undefined {
  if (attempt !== undefined) return outputs.find((o) => o.attempt === attempt);
  return outputs.findLast((o) => o.files.length > 0) ?? outputs.at(-1);
}
