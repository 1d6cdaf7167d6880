// The job spec (docs/job-spec.md): what a user hands `berth submit`. Strict everywhere a typo could
// hide (top level, `search`, operator objects, relax steps), so a misspelt field is an error rather
// than a silently ignored wish. Issue messages are worded in ./issues.ts; the cross-field rules run
// even when other fields are wrong, so that one validation reports every problem.
import { z } from 'zod';
import { MAX_RUN_DURATION_S, RESERVED_KEYS, type RelaxStep } from '../config/schema.js';
import { CREATE_INPUT_LIMITS as LIMITS, envTotalSize, sizeOf } from './create-input-limits.js';
import { ONSTART_TOO_LARGE, onstartFits } from './onstart.js';
import { clashingOutputs } from './output-names.js';
import { isSearchField, operandIssues, unknownSearchFieldMessage } from './search-fields.js';
import { KEEP_ON_FAILURE_MAX_S, TASK_TOO_LARGE, WARM_IDLE_MAX_S, taskFits } from './task-script.js';

/** Values berth fills in when a spec leaves these fields out. */
export const JOB_SPEC_DEFAULTS = {
  /** Instance disk, GB. */
  disk_gb: 20,
  /**
   * Ready when berth logged in over SSH and ran a command (the banner alone when its key is refused
   * or cannot be used), not merely `running`. A task
   * is ready when the service lists it running: it needs no way in (run-plan.ts `planOf`).
   */
  ready_when: 'ssh',
  /** Interruptible runs: each rebid raises the bid by this many percent. */
  bid_step_pct: 10,
  /**
   * Interruptible runs, when outbid: raise the bid (within the cap) first. The stopped instance
   * keeps its disk and resumes without a new image pull or a new search, the cap bounds what it
   * can cost, and at the cap the run fails over to the next offer anyway.
   */
  on_outbid: 'rebid',
  /** Idle autostop: below this GPU utilisation, percent, an instance counts as idle. */
  idle_gpu_util_pct: 5,
  search: {
    type: 'on-demand',
    /** Offers asked for per search. */
    limit: 64,
    /** Best deep-learning performance per dollar first: the seed's own example of a sort key. */
    order: [['dlperf_per_dphtotal', 'desc']] as Array<[string, 'asc' | 'desc']>,
  },
} as const;

const FILTER_OPERATORS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'notin'] as const;

/** Offer fields that hold a price: the price cap is never relaxed, so relax steps may not touch them. */
export const PRICE_FIELDS: readonly string[] = ['dph_total', 'dph_base', 'min_bid', 'storage_cost', 'inet_up_cost', 'inet_down_cost'];

/** Keys of the search body that are not filters (the body is flat: filters sit next to them). */
const SEARCH_BODY_KEYS = ['order', 'type', 'limit'];

/** Placeholder replaced by the offending key when an unknown-key issue is split per key. */
export const KEY_PLACEHOLDER = '{key}';

/** `__proto__` and its kin would be dropped or reach the prototype: refused by name, never dropped. */
const notReserved = { error: (iss: { input: unknown }) => `"${String(iss.input)}" is a reserved name, not a field` };

const fieldName = z
  .string()
  .regex(/^[a-z_][a-z0-9_]*$/, 'an offer field name is lowercase letters, digits and "_"')
  .refine((f) => !RESERVED_KEYS.has(f), notReserved)
  .refine((f) => !SEARCH_BODY_KEYS.includes(f), { error: (iss) => `"${String(iss.input)}" is not a filter` });

const scalar = z.union([z.string(), z.number(), z.boolean()], {
  error: (iss) => `expected a string, number or boolean, got ${jsonType(iss.input)}`,
});

const bound = z.union([z.number(), z.string()], { error: (iss) => `expected a number, got ${jsonType(iss.input)}` });

/** `{op: value}` in the service's query language; several operators may bound one field. */
const filterOpsSchema = z
  .strictObject(
    {
      eq: scalar.optional(),
      neq: scalar.optional(),
      // A string only for GPU memory in GB (`"16GB"`, ./gpu-memory.ts): checkOperands refuses it elsewhere.
      gt: bound.optional(),
      gte: bound.optional(),
      lt: bound.optional(),
      lte: bound.optional(),
      in: z.array(scalar).min(1, 'must list at least one value').optional(),
      notin: z.array(scalar).optional(),
    },
    {
      error: (iss) =>
        iss.code === 'unrecognized_keys' ? `unknown operator "${KEY_PLACEHOLDER}" (operators: ${FILTER_OPERATORS.join(', ')})` : undefined,
    },
  )
  // Only when nothing else is wrong: `{"like": ...}` is already reported as an unknown operator.
  .refine((ops) => Object.keys(ops).length > 0, {
    message: `needs an operator (${FILTER_OPERATORS.join(', ')})`,
    when: (payload) => payload.issues.length === 0,
  });

/**
 * A documented search field (./search-fields.ts), with the nearest known name when it is not.
 * Said only when the name has nothing else wrong (a reserved name, a price a relax step may not
 * touch), so that one problem is said once.
 */
const knownField = <S extends z.ZodType<string>>(name: S) =>
  name.refine(isSearchField, {
    error: (iss) => unknownSearchFieldMessage(String(iss.input)),
    when: (payload) => payload.issues.length === 0,
  });

/** Each known field's operands against the kind of value it compares (`num_gpus: {"eq": "1"}` is refused). */
function checkOperands(filters: Record<string, unknown>, ctx: z.RefinementCtx): void {
  for (const [field, ops] of Object.entries(filters)) {
    if (!isPlainObject(ops)) continue;
    for (const issue of operandIssues(field, ops)) ctx.addIssue({ code: 'custom', path: [field, ...issue.path], message: issue.message });
  }
}
const operandsChecked = { when: (payload: { value: unknown }) => isPlainObject(payload.value) };

/** `search.filters` (the JSON Schema the dashboard checks with is replaced by the field table's, see validate.ts). */
export const searchFiltersSchema = z
  .record(
    knownField(fieldName.refine((f) => f !== 'dph_total', 'the price is capped by max_price_per_hour, not by a dph_total filter')),
    filterOpsSchema,
  )
  .superRefine(checkOperands, operandsChecked);

const searchSchema = z.strictObject({
  filters: searchFiltersSchema.default({}),
  order: z
    .array(z.tuple([fieldName, z.enum(['asc', 'desc'])]))
    .default(JOB_SPEC_DEFAULTS.search.order)
    .describe('Sort keys, e.g. [["dlperf_per_dphtotal", "desc"]]'),
  type: z
    .enum(['on-demand', 'bid'])
    .default(JOB_SPEC_DEFAULTS.search.type)
    .describe('"bid" rents interruptible instances and needs bid_price'),
  limit: z.number().int().min(1).max(1000).default(JOB_SPEC_DEFAULTS.search.limit),
});

// A relax step has the shape of config's relaxStepSchema (its output is a RelaxStep), with the
// operators checked and the fields that are never relaxed refused. It is not built on that schema
// because a refinement there would be skipped whenever the step's shape has another problem, and
// validation must report every problem at once.
const neverRelaxed = (field: string) => PRICE_FIELDS.includes(field) || field === 'direct_port_count';

/** A relax step's `set`: filters as in search.filters, except prices; direct_port_count stays at 1 or more. */
export const relaxSetSchema = z
  .record(
    knownField(
      fieldName.refine((f) => !PRICE_FIELDS.includes(f), {
        error: (iss) => `"${String(iss.input)}" is a price: the price cap is never relaxed`,
      }),
    ),
    filterOpsSchema,
  )
  .superRefine(
    (set: Record<string, unknown>, ctx) => {
      const ports = set['direct_port_count'];
      if (isPlainObject(ports) && !requiresAtLeastOne(ports)) {
        ctx.addIssue({
          code: 'custom',
          path: ['direct_port_count'],
          message: 'must keep direct_port_count at 1 or more (SSH needs a direct port), e.g. {"gte": 1}',
        });
      }
      checkOperands(set, ctx);
    },
    { when: (payload) => isPlainObject(payload.value) },
  );

const relaxStepSchema = z
  .strictObject({
    drop: z
      .array(
        knownField(
          fieldName.refine((f) => !neverRelaxed(f), {
            error: (iss) => `"${String(iss.input)}" is never relaxed (price cap and SSH port)`,
          }),
        ),
      )
      .min(1, 'must name at least one filter')
      .optional(),
    set: relaxSetSchema.optional(),
  })
  .refine((s) => s.drop !== undefined || s.set !== undefined, 'a relax step needs "drop" or "set"');

/**
 * A relax ladder, as a spec's `relax` holds it and as the daemon's default (`runs.relax`) is parsed
 * at start: the ladder a run takes from the config is stored in its spec and read back by this same
 * schema, so a ladder it refuses must stop the daemon, not the runs that took it.
 */
export const relaxLadderSchema = z.array(relaxStepSchema);

/**
 * Whether the operators alone guarantee a value of at least 1 (port counts are integers).
 * Reads them as unknown: like the other cross-checks it runs even when the step has other problems.
 */
function requiresAtLeastOne(ops: Record<string, unknown>): boolean {
  const atLeastOne = (v: unknown) => typeof v === 'number' && v >= 1;
  const { gte, gt, eq, in: oneOf } = ops;
  return (
    atLeastOne(gte) ||
    (typeof gt === 'number' && gt >= 0) ||
    atLeastOne(eq) ||
    (Array.isArray(oneOf) && oneOf.length > 0 && oneOf.every(atLeastOne))
  );
}

/** `env` and `secrets`: both are set in the instance's environment, so the service's limits bind both. */
const envSchema = z
  .record(
    z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name matches ^[A-Za-z_][A-Za-z0-9_]*$')
      .refine((k) => !RESERVED_KEYS.has(k), notReserved),
    // The value may be a secret: the message gives its size, never the value.
    z.string().refine((v) => sizeOf(v) <= LIMITS.envValueMaxChars, {
      error: (iss) => `is ${sizeOf(String(iss.input))} characters; the service takes at most ${LIMITS.envValueMaxChars} per value`,
    }),
  )
  .refine((env) => envTotalSize(env) <= LIMITS.envTotalMaxChars, {
    error: (iss) =>
      `is ${envTotalSize(iss.input as Record<string, string>)} characters in all (as "-e NAME=value ..."); the service takes at most ${LIMITS.envTotalMaxChars}`,
  });

/** One output path: absolute, or relative to OUTPUTS_BASE (./output-names.ts); never `..` (a path leaves nothing to guess). */
const outputPathSchema = z
  .string()
  .min(1, 'must be a container path, not empty')
  .max(1024, 'must be at most 1024 characters')
  .refine((p) => !p.includes('\0') && !/[\r\n]/.test(p), 'must not contain NUL or line breaks')
  .refine((p) => !p.split('/').includes('..'), 'must not contain ".." (name the path itself)');

const outputPathsSchema = z.array(outputPathSchema).min(1, 'must name at least one path').max(100, 'must name at most 100 paths');

/** `outputs`: a list of paths, or the long form with a cloud destination (one path: see checkOutputs). */
const outputsSchema = z.union(
  [
    outputPathsSchema,
    z.strictObject({
      paths: outputPathsSchema,
      cloud: z
        .strictObject({
          connection: z
            .union([z.string().min(1), z.number().int().positive()])
            .describe('A cloud connection of the account, by name or id (GET /api/v0/users/cloud_integrations/)'),
          path: z.string().min(1, 'must be the destination path in the bucket').max(1024).describe('Destination in the cloud storage'),
        })
        .optional(),
    }),
  ],
  { error: (iss) => `expected a list of container paths or {paths, cloud}, got ${jsonType(iss.input)}` },
);

/** Where a task's workdir lands, and where the task starts, when the spec does not say. */
export const WORKDIR_DEST_DEFAULT = '/root/workdir';

/** An absolute directory in the container, in plain characters (the wrapper quotes it for sh). */
const containerDirSchema = z
  .string()
  .regex(/^\/[A-Za-z0-9._/+@=-]*$/, 'must be an absolute path of letters, digits and . _ / + @ = -')
  .refine((s) => !s.split('/').includes('..'), 'must not contain ".."')
  .refine((s) => s.replace(/\/+$/, '') !== '', 'must not be "/"')
  .refine((s) => s.length <= 256, 'must be at most 256 characters');

export const jobSpecSchema = z
  .strictObject({
    name: z
      .string()
      .max(100, 'must be at most 100 characters')
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'must start with a letter or digit and use only letters, digits, ".", "_" and "-"')
      .describe('Run name shown in status tables'),
    image: z
      .string()
      .regex(/^\S+$/, 'must be a non-empty image reference without spaces')
      .refine((s) => sizeOf(s) <= LIMITS.imageMaxChars, `must be at most ${LIMITS.imageMaxChars} characters (the service's limit)`)
      .describe('Container image'),
    disk_gb: z
      .number()
      .min(LIMITS.diskMinGb, `must be at least ${LIMITS.diskMinGb} GB (the service's minimum disk)`)
      .default(JOB_SPEC_DEFAULTS.disk_gb)
      .describe('Instance disk, GB'),
    onstart: z
      .string()
      .refine(onstartFits, ONSTART_TOO_LARGE)
      .optional()
      .describe('Script run when the instance starts; any length (long scripts are sent compressed)'),
    env: envSchema
      .optional()
      .describe(
        'Environment variables of the instance, shown as written (names that say KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL are kept out of logs as secrets)',
      ),
    secrets: envSchema
      .optional()
      .describe('Environment variables of the instance whose values are kept out of every log, event and answer'),
    search: searchSchema.prefault({}).describe("Offer search in the service's query language"),
    bid_price: z
      .union(
        [
          z
            .number()
            .min(LIMITS.bidPriceMin, `must be at least ${LIMITS.bidPriceMin} $/h (the service's minimum bid)`)
            .max(LIMITS.bidPriceMax, `must be at most ${LIMITS.bidPriceMax} $/h (the service's maximum bid)`),
          z.literal('min'),
        ],
        { error: (iss) => `expected a number ($/h) or "min", got ${jsonType(iss.input)}` },
      )
      .optional()
      .describe('$/h compute bid, or "min" (the offer\'s min_bid at the create); required when search.type is "bid"'),
    bid_step_pct: z
      .number()
      .positive()
      .max(100)
      .optional()
      .describe(`Percent a rebid raises the bid by (default ${JOB_SPEC_DEFAULTS.bid_step_pct}); search.type "bid" only`),
    on_outbid: z
      .enum(['rebid', 'failover', 'on_demand'])
      .optional()
      .describe(
        `When outbid: "rebid" (raise the bid up to the cap, then fail over), "failover" (next offer) or "on_demand" (on-demand offers under the same cap); default "${JOB_SPEC_DEFAULTS.on_outbid}"; search.type "bid" only`,
      ),
    ready_when: z
      .enum(['ssh', 'status'])
      .optional()
      .describe(
        '"ssh": running once berth logged in over SSH and ran a command, or SSH answered with a banner where it cannot log in (default); "status": once the service says running (always, for a task)',
      ),
    relax: relaxLadderSchema.optional().describe('Ordered steps applied one by one while no usable offer is found; default from config'),
    max_price_per_hour: z.number().positive().describe('Price cap in $/h (dph_total); never relaxed'),
    max_attempts: z.number().int().min(1).optional().describe('Offers tried before the run fails; default from config'),
    boot_timeout_s: z
      .number()
      .positive()
      .max(MAX_RUN_DURATION_S)
      .optional()
      .describe('Seconds an instance may stay loading (at most 365 days); default from config'),
    deadline_s: z
      .number()
      .positive()
      .max(MAX_RUN_DURATION_S)
      .optional()
      .describe('Seconds from submission until the run fails (at most 365 days); default from config'),
    // The money guard (src/daemon/money/money-guard.ts): the run ends `expired` at either limit.
    max_runtime_s: z
      .number()
      .positive()
      .max(MAX_RUN_DURATION_S)
      .optional()
      .describe(
        'Total seconds the run may spend running (every attempt counted; at most 365 days), then its instance is destroyed and it ends expired; default runs.max_runtime_s of the config (none)',
      ),
    budget_usd: z
      .number()
      .positive()
      .max(1_000_000)
      .optional()
      .describe(
        'Total $ the run may spend (every instance it made, compute and disk, until destroyed), then it ends expired; default none',
      ),
    // Tasks (issue #19): the command the instance exists for; when it ends, the run ends and its
    // instance is destroyed (src/job-spec/task-script.ts wraps it for the container).
    run: z
      .string()
      .refine((s) => s.trim() !== '', 'must be a command, not empty')
      .refine((s) => !s.includes('\0'), 'must not contain NUL characters')
      .optional()
      .describe(
        'Command run after onstart, in the container; when it ends the run ends (succeeded on exit 0, else failed with error.kind "task_failed") and the instance is destroyed',
      ),
    // A task's code (issue #40, docs/files.md): packed by `berth submit`, stored with the run by its
    // sha256, uploaded into workdir_dest on every attempt before the task starts there.
    workdir: z
      .string()
      .min(1, 'must be the path of a local directory')
      .refine((s) => !s.includes('\0'), 'must not contain NUL characters')
      .optional()
      .describe(
        'A local directory (relative to the spec file) that `berth submit` packs (honouring .gitignore and .berthignore) and berth uploads into workdir_dest on every attempt; the task starts there. Needs run',
      ),
    workdir_dest: containerDirSchema
      .optional()
      .describe(
        `Where workdir lands in the container, an absolute path (default ${WORKDIR_DEST_DEFAULT}); the task starts there. Needs workdir`,
      ),
    workdir_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits (the sha256 of the packed workdir)')
      .optional()
      .describe('Set by `berth submit`: the sha256 of the packed workdir, uploaded to the daemon before the spec (PUT /v1/blobs/{sha256})'),
    max_restarts: z
      .number()
      .int('must be a whole number')
      .min(0, 'must be 0 or more')
      .max(1000)
      .optional()
      .describe('Times a task that exited non-zero starts again, each on a fresh instance (default 0); needs run'),
    // Issue #50: a way in after a crash, bounded (docs/tasks.md "Keeping a failed task's instance").
    keep_on_failure_s: z
      .number()
      .int('must be a whole number of seconds')
      .min(0, 'must be 0 or more')
      .max(KEEP_ON_FAILURE_MAX_S, `must be at most ${KEEP_ON_FAILURE_MAX_S} (an hour): the kept instance bills its GPU meanwhile`)
      .optional()
      .describe(
        `Seconds a task that fails for good (no restart left) keeps its instance, after its outputs are taken, for \`berth ssh\`; then it is destroyed, by the container itself when no daemon is up (default 0, at most ${KEEP_ON_FAILURE_MAX_S}); needs run`,
      ),
    // Issue #51: the instance kept warm for the next task of the same spec (docs/tasks.md "Warm instances").
    warm: z
      .strictObject({
        idle_s: z
          .number()
          .int('must be a whole number of seconds')
          .min(1, 'must be 1 or more')
          .max(WARM_IDLE_MAX_S, `must be at most ${WARM_IDLE_MAX_S} (an hour): the warm instance bills its GPU meanwhile`)
          .describe('Seconds the instance waits, running, for a taker; then it is destroyed, by the container itself when no daemon is up'),
      })
      .optional()
      .describe(
        `When the task ends on its own (any exit code) and its outputs are taken, its instance is kept running for at most idle_s (at most ${WARM_IDLE_MAX_S}) for the next run whose image, disk, runtype, ports, onstart, env, secrets and search filters are the same; that run starts on it in a fresh container instead of renting; needs run, on-demand only`,
      ),
    // Outputs (issue #40): container paths downloaded when the task ends, before the destroy
    // (src/daemon/task-files/outputs-download.ts), or copied to a cloud connection (outputs.cloud).
    outputs: outputsSchema
      .optional()
      .describe(
        'Files or directories the task leaves, downloaded when it ends (any exit code) before its instance is destroyed: a list of container paths (relative ones are relative to /root/workdir, where the task starts), or {paths, cloud: {connection, path}} to copy one path to a cloud connection instead; needs run',
      ),
    idle_timeout_s: z
      .number()
      .positive()
      .max(MAX_RUN_DURATION_S)
      .optional()
      .describe(
        'Seconds the instance\'s gpu_util may stay below idle_gpu_util_pct before it is destroyed and the run ends expired (error.kind "idle"); at least two poll intervals',
      ),
    idle_gpu_util_pct: z
      .number()
      .min(0, 'must be between 0 and 100')
      .max(100, 'must be between 0 and 100')
      .optional()
      .describe(
        `GPU utilisation, percent, below which the instance counts as idle (default ${JOB_SPEC_DEFAULTS.idle_gpu_util_pct}); needs idle_timeout_s`,
      ),
  })
  .superRefine(checkBid, { when: (payload) => isPlainObject(payload.value) })
  .superRefine(checkTask, { when: (payload) => isPlainObject(payload.value) })
  .superRefine(checkEnvWithSecrets, { when: (payload) => isPlainObject(payload.value) })
  .superRefine(checkOutputs, { when: (payload) => isPlainObject(payload.value) })
  .superRefine(checkWorkdir, { when: (payload) => isPlainObject(payload.value) });

// Outputs come from a task's container when the task ends: without `run` there is no such end. A
// cloud copy takes one path (FILES-DESIGN: an old "Finished" in the status bar would otherwise be
// taken for a later copy's). Reads the raw object (see checkBid).
function checkOutputs(spec: { outputs?: unknown; run?: unknown }, ctx: z.RefinementCtx) {
  if (spec.outputs === undefined) return;
  if (spec.run === undefined) ctx.addIssue({ code: 'custom', path: ['outputs'], message: 'only applies with run (a task leaves outputs)' });
  const o = spec.outputs;
  if (isPlainObject(o) && isPlainObject(o['cloud']) && Array.isArray(o['paths']) && o['paths'].length !== 1) {
    ctx.addIssue({ code: 'custom', path: ['outputs', 'paths'], message: 'must name exactly one path with cloud (one cloud copy per run)' });
  }
  const list = Array.isArray(o) ? o : isPlainObject(o) && Array.isArray(o['paths']) ? o['paths'] : [];
  if (!list.every((p): p is string => typeof p === 'string')) return;
  const at = Array.isArray(o) ? ['outputs'] : ['outputs', 'paths'];
  for (const c of clashingOutputs(list))
    ctx.addIssue({
      code: 'custom',
      path: [...at, c.index],
      message: `would be kept as ${JSON.stringify(c.name)}, where ${at.join('.')}[${c.other}] (${JSON.stringify(list[c.other])}) keeps its files too (one name for two files, or one folder inside the other): drop one of the two paths`,
    });
}

// The workdir is a task's code: it needs run, and its fields need it. Reads the raw object (see checkBid).
function checkWorkdir(spec: { run?: unknown; workdir?: unknown; workdir_dest?: unknown; workdir_sha256?: unknown }, ctx: z.RefinementCtx) {
  if (spec.workdir !== undefined && spec.run === undefined)
    ctx.addIssue({ code: 'custom', path: ['workdir'], message: 'only applies with run (a task started in it)' });
  for (const field of ['workdir_dest', 'workdir_sha256'] as const) {
    if (spec[field] !== undefined && spec.workdir === undefined)
      ctx.addIssue({ code: 'custom', path: [field], message: 'only applies with workdir' });
  }
}

// Both go into the instance's environment: one name may not be in both, and together they are one
// environment for the service's total limit. Reads the raw object (see checkBid).
function checkEnvWithSecrets(spec: { env?: unknown; secrets?: unknown }, ctx: z.RefinementCtx) {
  if (!isPlainObject(spec.env) || !isPlainObject(spec.secrets)) return;
  for (const name of Object.keys(spec.secrets)) {
    if (Object.hasOwn(spec.env, name))
      ctx.addIssue({ code: 'custom', path: ['secrets', name], message: 'is also in env: give it in one of them' });
  }
  const all = Object.fromEntries(Object.entries({ ...spec.env, ...spec.secrets }).map(([k, v]) => [k, String(v)]));
  if (envTotalSize(all) > LIMITS.envTotalMaxChars) {
    ctx.addIssue({
      code: 'custom',
      path: ['secrets'],
      message: `with env is ${envTotalSize(all)} characters in all (as "-e NAME=value ..."); the service takes at most ${LIMITS.envTotalMaxChars}`,
    });
  }
}

// Like checkBid: reads the raw object, whatever else is wrong with it.
function checkTask(
  spec: {
    run?: unknown;
    onstart?: unknown;
    max_restarts?: unknown;
    keep_on_failure_s?: unknown;
    warm?: unknown;
    search?: unknown;
    outputs?: unknown;
    ready_when?: unknown;
    idle_timeout_s?: unknown;
    idle_gpu_util_pct?: unknown;
  },
  ctx: z.RefinementCtx,
) {
  // The wrapper carries onstart and run together: too large is said of run, the field it adds.
  if (
    typeof spec.run === 'string' &&
    spec.run.trim() !== '' &&
    !taskFits(spec.run, typeof spec.onstart === 'string' ? spec.onstart : undefined)
  ) {
    ctx.addIssue({ code: 'custom', path: ['run'], message: TASK_TOO_LARGE });
  }
  if (spec.max_restarts !== undefined && spec.run === undefined) {
    ctx.addIssue({ code: 'custom', path: ['max_restarts'], message: 'only applies with run (a task to restart)' });
  }
  if (spec.keep_on_failure_s !== undefined && spec.run === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['keep_on_failure_s'],
      message: 'only applies with run (a task whose failure keeps its instance)',
    });
  }
  if (spec.warm !== undefined && spec.run === undefined) {
    ctx.addIssue({ code: 'custom', path: ['warm'], message: 'only applies with run (a task whose end leaves its instance warm)' });
  }
  if (spec.warm !== undefined && isPlainObject(spec.search) && spec.search['type'] === 'bid') {
    ctx.addIssue({
      code: 'custom',
      path: ['warm'],
      message: 'applies to on-demand instances only (search.type "bid" may be outbid while warm, and an outbid instance is never reused)',
    });
  }
  if (spec.warm !== undefined && isPlainObject(spec.outputs) && 'cloud' in spec.outputs) {
    ctx.addIssue({
      code: 'custom',
      path: ['warm'],
      message:
        'cannot keep warm an instance whose outputs go to the cloud (outputs.cloud stops it first): download them instead (a list of paths)',
    });
  }
  // A cloud copy stops the instance first (its disk only bills): a stopped instance has no sshd to enter.
  if (typeof spec.keep_on_failure_s === 'number' && spec.keep_on_failure_s > 0 && isPlainObject(spec.outputs) && 'cloud' in spec.outputs) {
    ctx.addIssue({
      code: 'custom',
      path: ['keep_on_failure_s'],
      message:
        'cannot keep an instance whose outputs go to the cloud (outputs.cloud stops it first, and a stopped instance has no SSH): download them instead (a list of paths)',
    });
  }
  // A task needs no way in (its end is read from its log), so SSH that never answers from the
  // daemon's network must never destroy one that works: it is ready when the service lists it running.
  if (spec.ready_when === 'ssh' && spec.run !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['ready_when'],
      message: 'a task is ready when the service lists its instance running ("status"); "ssh" applies only to runs without run',
    });
  }
  if (spec.idle_gpu_util_pct !== undefined && spec.idle_timeout_s === undefined) {
    ctx.addIssue({ code: 'custom', path: ['idle_gpu_util_pct'], message: 'only applies with idle_timeout_s' });
  }
}

// Runs on the raw object even when other fields failed (see `when` above), so every field it reads
// may be of any type: each comparison checks its operands.
function checkBid(
  spec: { search?: { type?: unknown }; bid_price?: unknown; bid_step_pct?: unknown; on_outbid?: unknown; max_price_per_hour?: unknown },
  ctx: z.RefinementCtx,
) {
  const search: unknown = spec.search;
  const bid = isPlainObject(search) && search['type'] === 'bid';
  if (bid && spec.bid_price === undefined) {
    ctx.addIssue({ code: 'custom', path: ['bid_price'], message: 'required when search.type is "bid"' });
  }
  for (const field of ['bid_price', 'bid_step_pct', 'on_outbid'] as const) {
    if (!bid && spec[field] !== undefined) {
      ctx.addIssue({ code: 'custom', path: [field], message: 'only applies when search.type is "bid"' });
    }
  }
  if (
    bid &&
    typeof spec.bid_price === 'number' &&
    typeof spec.max_price_per_hour === 'number' &&
    spec.bid_price > spec.max_price_per_hour
  ) {
    ctx.addIssue({ code: 'custom', path: ['bid_price'], message: 'must not exceed max_price_per_hour' });
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The JSON type name of a value, as issue messages print it ("got string"). */
export function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/** A parsed spec: everything checked, spec-level defaults (disk, search) filled in. */
export type JobSpec = z.output<typeof jobSpecSchema>;

/** A spec ready to run: limits and the relax ladder filled from `config.runs` where the spec left them out. */
export type ResolvedJobSpec = Omit<JobSpec, 'relax' | 'max_attempts' | 'boot_timeout_s' | 'deadline_s'> & {
  relax: RelaxStep[];
  max_attempts: number;
  boot_timeout_s: number;
  deadline_s: number;
};
// max_runtime_s stays optional after resolving: absent means no runtime limit (and specs stored
// before the field existed read the same way).
