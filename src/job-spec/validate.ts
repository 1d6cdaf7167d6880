// Entry points for job specs: parse (from a value or from JSON text) reporting every problem at
// once, fill the run limits from the configuration, and publish the spec's JSON Schema.
import { z } from 'zod';
import type { Config } from '../config/schema.js';
import { SpecError } from '../errors.js';
import { describeIssue, toSpecIssues } from './issues.js';
import { jobSpecSchema, type JobSpec, type ResolvedJobSpec } from './schema.js';

/** Checks a job spec; throws SpecError listing every problem with its JSON path. */
export function parseJobSpec(input: unknown): JobSpec {
  const result = jobSpecSchema.safeParse(input, { error: describeIssue });
  if (result.success) return result.data;
  throw new SpecError(toSpecIssues(result.error.issues));
}

/** Parses the text of a job spec file; a JSON syntax error is reported at `$`. */
export function parseJobSpecText(text: string): JobSpec {
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch (err) {
    throw new SpecError([{ path: '$', message: `not valid JSON: ${(err as Error).message}` }]);
  }
  return parseJobSpec(input);
}

/** Fills the limits and the relax ladder the spec left out from the configured run defaults. */
export function resolveJobSpec(spec: JobSpec, runsDefaults: Config['runs']): ResolvedJobSpec {
  return {
    ...spec,
    relax: spec.relax ?? runsDefaults.relax,
    max_attempts: spec.max_attempts ?? runsDefaults.max_attempts,
    boot_timeout_s: spec.boot_timeout_s ?? runsDefaults.boot_timeout_s,
    deadline_s: spec.deadline_s ?? runsDefaults.deadline_s,
  };
}

/** The JSON Schema of a job spec file as users write it (defaulted fields are optional). */
export function jobSpecJsonSchema(): object {
  return z.toJSONSchema(jobSpecSchema, { io: 'input' });
}
