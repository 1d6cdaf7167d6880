// The offer search's fields as the service documents them: the filter keys of search_offers.yaml's
// request schema, united with the official CLI's field table (vast-cli `vastai/api/query.py`,
// `offers_fields`, which adds `cluster_id`), each with the type of value it compares. A job spec's
// filters and relax steps are checked against it, so that a misspelt field (`gpu_nmae`) or a string
// where the service compares a number (`num_gpus: {"eq": "1"}`) is refused at `validate`/`submit`
// with its path and the nearest known name, instead of a 400 on the first search or a filter that
// silently matches nothing (issue #30).
//
// Kinds: `number` (counts, sizes, prices, ids), `boolean`, `flag` (true/false or 0/1: the docs'
// example offer has `has_avx: 1`), `text` (names and codes: compared by eq/neq/in/notin only) and
// `version` (`driver_version` "535.86.05", `os_version` "22.04": a string, or the number the CLI
// turns a dotted driver version into).

import { gpuMemoryOperandIssues, isGpuMemoryField, withoutStrings } from './gpu-memory.js';

export type SearchFieldKind = 'number' | 'boolean' | 'flag' | 'text' | 'version';

const NUMBER_FIELDS = [
  'bw_nvlink',
  'cluster_id',
  'compute_cap',
  'cpu_cores',
  'cpu_cores_effective',
  'cpu_ghz',
  'cpu_ram',
  'cuda_max_good',
  'direct_port_count',
  'disk_bw',
  'disk_space',
  'dlperf',
  'dlperf_per_dphtotal',
  'dph_total',
  'duration',
  'flops_per_dphtotal',
  'gpu_frac',
  'gpu_max_power',
  'gpu_max_temp',
  'gpu_mem_bw',
  'gpu_ram',
  'gpu_total_ram',
  'host_id',
  'id',
  'inet_down',
  'inet_down_cost',
  'inet_up',
  'inet_up_cost',
  'machine_id',
  'min_bid',
  'num_gpus',
  'pci_gen',
  'pcie_bw',
  'reliability',
  'storage_cost',
  'total_flops',
] as const;
const BOOLEAN_FIELDS = [
  'datacenter',
  'external',
  'gpu_display_active',
  'rentable',
  'rented',
  'static_ip',
  'verified',
  'vms_enabled',
] as const;
const TEXT_FIELDS = ['cpu_arch', 'geolocation', 'gpu_arch', 'gpu_name', 'mobo_name', 'verification'] as const;
const VERSION_FIELDS = ['driver_version', 'os_version', 'ubuntu_version'] as const;

/** Every documented search field and the kind of value it compares. */
export const SEARCH_FIELDS: Readonly<Record<string, SearchFieldKind>> = Object.freeze({
  ...Object.fromEntries(NUMBER_FIELDS.map((f) => [f, 'number'])),
  ...Object.fromEntries(BOOLEAN_FIELDS.map((f) => [f, 'boolean'])),
  ...Object.fromEntries(TEXT_FIELDS.map((f) => [f, 'text'])),
  ...Object.fromEntries(VERSION_FIELDS.map((f) => [f, 'version'])),
  has_avx: 'flag',
});

/** The CLI's short names (`offers_alias`): the CLI rewrites them, the service knows only the long ones. */
const CLI_ALIASES: Readonly<Record<string, string>> = {
  cuda_vers: 'cuda_max_good',
  display_active: 'gpu_display_active',
  dlperf_usd: 'dlperf_per_dphtotal',
  dph: 'dph_total',
  flops_usd: 'flops_per_dphtotal',
};

export function isSearchField(name: string): boolean {
  return Object.hasOwn(SEARCH_FIELDS, name);
}

/** Edit distance (insert, delete, substitute, swap of neighbours), for the nearest-name hint. */
export function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/** The known field a misspelt `name` most likely meant, if one is close enough to suggest. */
export function nearestSearchField(name: string): string | undefined {
  const alias = CLI_ALIASES[name];
  if (alias) return alias;
  let best: string | undefined;
  let bestD = Infinity;
  for (const field of Object.keys(SEARCH_FIELDS)) {
    const d = distance(name, field);
    if (d < bestD || (d === bestD && best !== undefined && field < best)) {
      best = field;
      bestD = d;
    }
  }
  // Close enough to be a typo: up to a third of the name's length in edits, and always 2.
  const near = bestD <= Math.max(2, Math.floor(name.length / 3));
  return near ? best : undefined;
}

/** `unknown search field; did you mean gpu_name?` */
export function unknownSearchFieldMessage(name: string): string {
  const near = nearestSearchField(name);
  const alias = CLI_ALIASES[name] ? " (the CLI's short name: the service knows the long one)" : '';
  return near ? `unknown search field${alias}; did you mean ${near}?` : 'unknown search field (see search_offers in the service docs)';
}

const KIND_WORDS: Record<SearchFieldKind, string> = {
  number: 'a number',
  boolean: 'true or false',
  flag: 'true, false, 0 or 1',
  text: 'a string',
  version: 'a string or a number',
};

function fitsKind(kind: SearchFieldKind, v: unknown): boolean {
  switch (kind) {
    case 'number':
      return typeof v === 'number';
    case 'boolean':
      return typeof v === 'boolean';
    case 'flag':
      return typeof v === 'boolean' || v === 0 || v === 1;
    case 'text':
      return typeof v === 'string';
    case 'version':
      return typeof v === 'string' || typeof v === 'number';
  }
}

const isScalar = (v: unknown) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
const gotType = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

export interface OperandIssue {
  path: Array<string | number>;
  message: string;
}

/**
 * What is wrong with the operands of one known field's `{op: value}`, relative to that object.
 * Only what the generic operator schema lets through is judged here (a scalar where one is
 * expected, a number for the comparisons), so a problem is never reported twice.
 */
export function operandIssues(field: string, ops: Record<string, unknown>): OperandIssue[] {
  const kind = SEARCH_FIELDS[field];
  if (kind === undefined) return [];
  const issues: OperandIssue[] = [];
  const expect = (path: Array<string | number>, v: unknown) => {
    if (isScalar(v) && !fitsKind(kind, v)) issues.push({ path, message: `expected ${KIND_WORDS[kind]}, got ${gotType(v)}` });
  };
  if (isGpuMemoryField(field)) {
    // A figure in GB (`"16GB"`) where a number is compared: ./gpu-memory.ts judges those strings.
    issues.push(...gpuMemoryOperandIssues(ops));
    ops = withoutStrings(ops);
  }
  for (const [op, v] of Object.entries(ops)) {
    if ((op === 'gt' || op === 'gte' || op === 'lt' || op === 'lte') && typeof v === 'string')
      issues.push({ path: [op], message: `expected a number, got string` });
    else if (op === 'eq' || op === 'neq') expect([op], v);
    else if ((op === 'in' || op === 'notin') && Array.isArray(v)) v.forEach((item, i) => expect([op, i], item));
    else if ((op === 'gt' || op === 'gte' || op === 'lt' || op === 'lte') && typeof v === 'number') {
      if (kind === 'boolean' || kind === 'flag' || kind === 'text') {
        issues.push({
          path: [op],
          message: `${op} does not apply to ${kind === 'text' ? 'a text' : 'a true/false'} field (use eq, neq, in or notin)`,
        });
      }
    }
  }
  return issues;
}

/** A figure in GB where GPU memory is compared (./gpu-memory.ts: GB_FIGURE). */
const GB_JSON = { type: 'string', pattern: '^\\s*\\d+(\\.\\d+)?\\s*[Gg][Bb]\\s*$' };

/** The JSON Schema of one known field's operators (for the dashboard's as-you-type check). */
function operandJsonSchema(field: string, kind: SearchFieldKind): object {
  const gb = isGpuMemoryField(field);
  const compared = gb ? { anyOf: [{ type: 'number' }, GB_JSON] } : { type: 'number' };
  const value =
    kind === 'number'
      ? { type: 'number' }
      : kind === 'boolean'
        ? { type: 'boolean' }
        : kind === 'flag'
          ? { anyOf: [{ type: 'boolean' }, { enum: [0, 1] }] }
          : kind === 'text'
            ? { type: 'string' }
            : { type: ['string', 'number'] };
  const comparable = kind === 'number' || kind === 'version';
  return {
    type: 'object',
    minProperties: 1,
    additionalProperties: false,
    properties: {
      eq: gb ? compared : value,
      neq: value,
      ...(comparable ? { gt: compared, gte: compared, lt: compared, lte: compared } : {}),
      in: { type: 'array', minItems: 1, items: value },
      notin: { type: 'array', items: value },
    },
  };
}

/** The JSON Schema of a `{field: {op: value}}` object: known fields only, each with its operand types. */
export function searchFiltersJsonSchema(exclude: readonly string[] = []): object {
  const fields = Object.entries(SEARCH_FIELDS).filter(([f]) => !exclude.includes(f));
  return {
    type: 'object',
    additionalProperties: false,
    properties: Object.fromEntries(fields.map(([f, kind]) => [f, operandJsonSchema(f, kind)])),
  };
}
