// `berth schema`: the job spec's JSON Schema, for editors and CI checks.
import { jobSpecJsonSchema } from '../../job-spec/validate.js';
import { EXIT } from '../exit-codes.js';
import { printJson, type Io } from '../io.js';

export function schemaCommand(io: Io): number {
  printJson(io, jobSpecJsonSchema());
  return EXIT.ok;
}
