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
import { jsonPath } from '../job-spec/issues.js';
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
  let sets: ReturnType<typeof parseOverride>[] = [];
  try {
    parsed = parseSpecText(text, specFormatOf(file));
    sets = overrides.map(parseOverride);
    spec = applyOverrides(parsed.value, sets);
    parseJobSpec(spec);
  } catch (err) {
    if (err instanceof SpecError) {
      const text = parsed;
      // Placed in the file unless a --set gave the value (then the message says so).
      const placed = err.issues.map((issue) => overrideIssue(issue, sets) ?? (text ? placeIssues([issue], text)[0]! : issue));
      throw new SpecFileError(file, placed);
    }
    throw err;
  }
  const bytes = specBytes(spec);
  if (bytes > MAX_SPEC_BYTES) throw new SpecFileError(file, [{ path: '$', message: `the spec is ${bytes} bytes as JSON; ${TOO_LARGE}` }]);
  return spec;
}

/**
 * An issue at a value a `--set` gave says so, with the way to quote it when a string was wanted
 * (`--set env.X=1` reads 1 as YAML, a number: issue #50), instead of a place in the file that the
 * value is not in (it was "line 1, column 1").
 */
function overrideIssue(issue: SpecIssue, sets: ReadonlyArray<ReturnType<typeof parseOverride>>): SpecIssue | null {
  const set = [...sets].reverse().find((o) => {
    const at = jsonPath(o.path);
    return issue.path === at || issue.path.startsWith(`${at}.`) || issue.path.startsWith(`${at}[`);
  });
  if (!set) return null;
  const eq = set.text.indexOf('=');
  const quote = /^expected a string, got /.test(issue.message)
    ? `: quote the value to keep it a string, --set '${set.text.slice(0, eq)}="${set.text.slice(eq + 1)}"'`
    : '';
  return { ...issue, message: `${issue.message} (from --set ${set.text}${quote})` };
}

/** `issues` found after readSpecFile (the GPU names: ./gpu-name-list.ts), placed at their line and column in the file. */
export function placeIssuesInFile(file: string, issues: SpecIssue[]): SpecIssue[] {
  try {
    return placeIssues(issues, parseSpecText(readRegularFile(file), specFormatOf(file)));
  } catch {
    return issues;
  }
}
