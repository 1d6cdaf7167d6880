// `berth validate FILE`: the daemon's own validation, without a daemon. Problems throw SpecFileError (exit 2).
import type { Io } from '../io.js';
import { EXIT } from '../exit-codes.js';
import { readSpecFile } from '../spec-file.js';

export function validateCommand(file: string, overrides: readonly string[], io: Io): number {
  readSpecFile(file, overrides);
  io.out(`${file} is a valid job spec.`);
  return EXIT.ok;
}
