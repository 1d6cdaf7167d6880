// Entry points for job specs: parse (from a value or from JSON text) reporting every problem at
// once, and publish the spec's JSON Schema. Defaults from the configuration are filled by ./run-plan.ts.
import { z } from 'zod';
import { minIdleTimeoutS } from '../config/durations.js';
import type { Config } from '../config/schema.js';
import { ConfigError, SpecError, type SpecIssue } from '../errors.js';
import { countText } from '../count-text.js';
import { describeIssue, jsonPath, toSpecIssues } from './issues.js';
import { jobSpecSchema, PRICE_FIELDS, relaxLadderSchema, relaxSetSchema, searchFiltersSchema, type JobSpec } from './schema.js';
import { searchFiltersJsonSchema } from './search-fields.js';

/** Checks a job spec; throws SpecError listing every problem with its JSON path. */
export function parseJobSpec(input: unknown): JobSpec {
  return parsed(jobSpecSchema, input);
}

/** `schema`'s parse of `input` with the spec's issue messages and its `__proto__` check; throws SpecError listing every problem. */
function parsed<T>(schema: z.ZodType<T>, input: unknown): T {
  const reserved = protoKeyIssues(input, []);
  const result = schema.safeParse(input, { error: describeIssue });
  if (result.success && reserved.length === 0) return result.data;
  const paths = new Set(reserved.map((i) => i.path));
  const issues = result.success ? [] : toSpecIssues(result.error.issues).filter((i) => !paths.has(i.path));
  throw new SpecError([...issues, ...reserved]);
}

/**
 * The daemon's default relax ladder (`runs.relax` of the config), parsed at start by the job spec's
 * own schema: the ladder is copied into the spec of every run that carries none, and a stored spec
 * is read back by that schema after a restart, so a ladder it refuses (a string number, an empty
 * `drop`, a dropped port filter, an unknown operator or field) stops the daemon here instead of
 * leaving runs it could not read. Throws a ConfigError naming the first bad field's path
 * (`runs.relax.0.set.gpu_ram.gte`). (Here, not in the config's schema: the config's room lies below
 * this one.)
 */
export function checkConfigRelax(relax: unknown): void {
  try {
    parsed(relaxLadderSchema, relax);
  } catch (err) {
    if (!(err instanceof SpecError)) throw err;
    const [first] = err.issues;
    // `$[0].set.gpu_ram.gte` → `runs.relax.0.set.gpu_ram.gte`, as the config's other errors name a field.
    const path = `runs.relax${first!.path.slice(1).replace(/\[(\d+)\]/g, '.$1')}`;
    const more = err.issues.length > 1 ? ` (${countText(err.issues.length - 1, 'more problem')})` : '';
    const stop = /[.?!]$/.test(first!.message) ? '' : '.';
    throw new ConfigError(`Invalid configuration: ${path}: ${first!.message}${stop}${more}`, path);
  }
}

/**
 * zod drops an own `__proto__` key (JSON.parse makes one) from records without a word, so an env
 * variable or filter of that name would vanish. They are found here, at any depth, and refused.
 */
function protoKeyIssues(value: unknown, path: PropertyKey[]): SpecIssue[] {
  if (typeof value !== 'object' || value === null) return [];
  const issues: SpecIssue[] = [];
  for (const [key, child] of Object.entries(value)) {
    const here = [...path, Array.isArray(value) ? Number(key) : key];
    if (key === '__proto__') issues.push({ path: jsonPath(here), message: '"__proto__" is a reserved name, not a field' });
    else issues.push(...protoKeyIssues(child, here));
  }
  return issues;
}

/** The JSON value of a job spec file's text; a syntax error is a SpecError at `$`. */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new SpecError([{ path: '$', message: `not valid JSON: ${(err as Error).message}` }]);
  }
}

/** Parses the text of a job spec file; a JSON syntax error is reported at `$`. */
export function parseJobSpecText(text: string): JobSpec {
  return parseJobSpec(parseJsonText(text));
}

/**
 * The JSON Schema of a job spec file as users write it (defaulted fields are optional). Filters and
 * relax steps' `set` list the documented search fields with their operand types, which zod's
 * refinements cannot say in JSON Schema, so that the dashboard refuses `gpu_nmae` as it is typed.
 */
export function jobSpecJsonSchema(): object {
  return z.toJSONSchema(jobSpecSchema, {
    io: 'input',
    override: (ctx) => {
      const fields =
        ctx.zodSchema === searchFiltersSchema
          ? searchFiltersJsonSchema(['dph_total'])
          : ctx.zodSchema === relaxSetSchema
            ? searchFiltersJsonSchema(PRICE_FIELDS)
            : undefined;
      if (!fields) return;
      const target = ctx.jsonSchema as Record<string, unknown>;
      for (const key of Object.keys(target)) if (key !== 'default' && key !== 'description') delete target[key];
      Object.assign(target, fields);
    },
  });
}

/**
 * The checks that need the daemon's configuration: an idle timeout shorter than two poll intervals
 * could not be measured (the lists that show gpu_util come once per interval). Throws SpecError.
 */
export function checkJobSpecAgainstConfig(spec: JobSpec, config: Pick<Config, 'polling'>): void {
  const min = minIdleTimeoutS(config);
  if (spec.idle_timeout_s !== undefined && spec.idle_timeout_s < min) {
    throw new SpecError([
      {
        path: '$.idle_timeout_s',
        message: `must be at least ${min} s: two poll intervals (polling.interval_s is ${config.polling.interval_s} s), since gpu_util is read from the lists`,
      },
    ]);
  }
}
