// Reading a job spec file for `validate` and `submit`: every problem is reported against the file
// it came from, whether found here or by the daemon.
import { readFileSync } from 'node:fs';
import { BerthError, SpecError, type SpecIssue } from '../errors.js';
import { parseJobSpecText } from '../job-spec/validate.js';

/** A SpecError that knows its file, so the problems are printed under the file's name. */
export class SpecFileError extends SpecError {
  constructor(
    readonly file: string,
    issues: SpecIssue[],
  ) {
    super(issues);
  }
}

/** The spec exactly as the user wrote it (the daemon fills the defaults), once it has passed local validation. */
export function readSpecFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new BerthError('bad_request', `Cannot read the job spec ${file} (${why}): check the path.`, { cause: err });
  }
  try {
    parseJobSpecText(text);
  } catch (err) {
    if (err instanceof SpecError) throw new SpecFileError(file, err.issues);
    throw err;
  }
  return JSON.parse(text) as unknown;
}
