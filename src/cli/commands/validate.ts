// `berth validate FILE`: the daemon's own validation, without a daemon. Problems throw SpecFileError (exit 2);
// warnings (an env variable whose name says it is a secret) go to stderr and leave the exit 0.
import type { Io } from '../io.js';
import { EXIT } from '../exit-codes.js';
import { readSpecFile } from '../spec-file.js';
import { secretEnvWarnings } from '../../job-spec/spec-secrets.js';
import { parseJobSpec } from '../../job-spec/validate.js';

export function validateCommand(file: string, overrides: readonly string[], io: Io): number {
  const spec = parseJobSpec(readSpecFile(file, overrides));
  for (const warning of secretEnvWarnings(spec)) io.err(`warning: ${warning}`);
  io.out(`${file} is a valid job spec.`);
  return EXIT.ok;
}
