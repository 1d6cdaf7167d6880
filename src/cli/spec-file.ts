// Reading a job spec file (JSON or YAML: ./spec-text.ts) for `validate`, `submit` and `offers`,
// with the command line's `--set` overrides (./spec-overrides.ts): every problem is reported against
// the file it came from, at its line and column where the file has it, whether found here or by the
// daemon. Only a regular file is read, and at most the
// size a job spec may have, so `berth submit /dev/zero` or a FIFO fails at once instead of hanging.
// The size limit is the daemon's (src/job-spec/spec-size.ts), counted on the JSON the CLI sends,
// so `validate` and `submit` accept exactly the same specs.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { BerthError, SpecError, type SpecIssue } from '../errors.js';
import { MAX_SPEC_BYTES, specBytes } from '../job-spec/spec-size.js';
import { parseJobSpec } from '../job-spec/validate.js';
import { applyOverrides, parseOverride } from './spec-overrides.js';
import { parseSpecText, placeIssues, specFormatOf, type SpecText } from './spec-text.js';

/** A SpecError that knows its file, so the problems are printed under the file's name. */
export class SpecFileError extends SpecError {
  constructor(
    readonly file: string,
    issues: SpecIssue[],
  ) {
    super(issues);
  }
}

const TOO_LARGE = `a job spec is at most ${MAX_SPEC_BYTES / 1024} KiB (${MAX_SPEC_BYTES} bytes) of JSON; put large scripts in the image or download them from onstart`;

function readRegularFile(file: string): string {
  let fd: number;
  try {
    // Non-blocking, so that opening a FIFO does not wait for a writer.
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new BerthError('bad_request', `Cannot read the job spec ${file} (${why}): check the path.`, { cause: err });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile())
      throw new BerthError('bad_request', `${file} is not a regular file (a directory, device or pipe): give the path of a job spec file.`);
    if (st.size > MAX_SPEC_BYTES) throw new SpecFileError(file, [{ path: '$', message: `the file is ${st.size} bytes; ${TOO_LARGE}` }]);
    const buf = Buffer.alloc(MAX_SPEC_BYTES + 1);
    let size = 0;
    for (let n = -1; n !== 0 && size < buf.length; size += n) n = readSync(fd, buf, size, buf.length - size, null);
    if (size > MAX_SPEC_BYTES)
      throw new SpecFileError(file, [{ path: '$', message: `the file is larger than ${MAX_SPEC_BYTES} bytes; ${TOO_LARGE}` }]);
    return buf.subarray(0, size).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * The spec exactly as the user wrote it (the daemon fills the defaults), with `overrides` applied,
 * once it has passed local validation. The text is parsed once: the value checked is the value sent.
 */
export function readSpecFile(file: string, overrides: readonly string[] = []): unknown {
  const text = readRegularFile(file);
  let parsed: SpecText | undefined;
  let spec: unknown;
  try {
    parsed = parseSpecText(text, specFormatOf(file));
    spec = applyOverrides(parsed.value, overrides.map(parseOverride));
    parseJobSpec(spec);
  } catch (err) {
    if (err instanceof SpecError) throw new SpecFileError(file, parsed ? placeIssues(err.issues, parsed) : err.issues);
    throw err;
  }
  const bytes = specBytes(spec);
  if (bytes > MAX_SPEC_BYTES) throw new SpecFileError(file, [{ path: '$', message: `the spec is ${bytes} bytes as JSON; ${TOO_LARGE}` }]);
  return spec;
}

/** `issues` found after readSpecFile (the GPU names: ./gpu-name-list.ts), placed at their line and column in the file. */
export function placeIssuesInFile(file: string, issues: SpecIssue[]): SpecIssue[] {
  try {
    return placeIssues(issues, parseSpecText(readRegularFile(file), specFormatOf(file)));
  } catch {
    return issues;
  }
}
