// GPU memory the way people say it (issue #50): a spec may bound `gpu_ram` (per card) or
// `gpu_total_ram` (all the offer's cards) with a figure in GB, `{"gte": "16GB"}`, matched against how
// cards list themselves. The service compares MB (search_offers.yaml: "GPU RAM in MB. Example:
// {"gte": 24000}"), and a card lists what its driver reports, in MiB: a Tesla T4 sold as 16 GB lists
// 15360 (15 GiB), an L40S sold as 48 GB 46068, an H100 sold as 80 GB 81559, an RTX 4090 24564, an
// RTX 3090 24576 (the simulator's catalog, src/sim/catalog.ts, holds these; the yaml's example offer
// lists 24576). The official CLI turns `gpu_ram>=16` into 16000 (vast-cli `offers_mult`: gpu_ram
// 1000), which excludes the T4; the service's own examples write `gpu_ram>=23` for a 24 GB RTX 3090
// (cli/templates.mdx).
//
// The rule: a card sold as N GB has at least N × 10^9 bytes and at most N GiB, so it lists from
// ceil(N × 10^9 / 2^20) to N × 1024 MiB (16 GB: 15259 to 16384; the T4's 15360 is in it, 101 MiB
// above the floor). So "at least N GB" (gte) asks for at least N × 10^9 bytes: never a card with less
// memory than was asked, counted in bytes; a 12 GB card (12288) stays out. "More than N GB" (gt)
// is more than any N GB card lists (> N × 1024); "at most" (lte) is up to N × 1024, "less than" (lt)
// below the floor; eq is the whole range. neq, in and notin take MB figures only (a range each).
/** The fields whose operands may be a figure in GB. */
const GPU_MEMORY_FIELDS: ReadonlySet<string> = new Set(['gpu_ram', 'gpu_total_ram']);

export const isGpuMemoryField = (field: string): boolean => GPU_MEMORY_FIELDS.has(field);

const GB_FIGURE = /^\s*(\d+(?:\.\d+)?)\s*GB\s*$/i;
const MIB = 2 ** 20;

/** `"16GB"` → 16; null when `v` is not a figure in GB. */
export function gbOf(v: unknown): number | null {
  if (typeof v !== 'string') return null;
  const m = GB_FIGURE.exec(v);
  const gb = m ? Number(m[1]) : NaN;
  return Number.isFinite(gb) && gb > 0 ? gb : null;
}

/** The MB (MiB) a card sold as `gb` GB lists: from `low` to `high`. */
export function gbListing(gb: number): { low: number; high: number } {
  return { low: Math.ceil((gb * 1e9) / MIB), high: Math.floor(gb * 1024) };
}

const COMPARISONS = ['gt', 'gte', 'lt', 'lte'];

/** What is wrong with a GPU memory field's string operands (the generic check leaves strings to this one). */
export function gpuMemoryOperandIssues(ops: Record<string, unknown>): Array<{ path: Array<string | number>; message: string }> {
  const issues: Array<{ path: Array<string | number>; message: string }> = [];
  const rangeOnly = (op: string, v: string) =>
    `${op} takes MB figures only: a figure in GB ("${v}") names a range of listings; use gte, lte or eq`;
  for (const [op, v] of Object.entries(ops)) {
    if (Array.isArray(v))
      v.forEach((item, i) => {
        if (typeof item === 'string')
          issues.push({ path: [op, i], message: gbOf(item) === null ? 'expected a number, got string' : rangeOnly(op, item) });
      });
    else if (typeof v !== 'string') continue;
    else if (op !== 'eq' && !COMPARISONS.includes(op)) issues.push({ path: [op], message: rangeOnly(op, v) });
    else if (gbOf(v) === null) issues.push({ path: [op], message: `expected a number (MB) or a figure in GB such as "16GB", got "${v}"` });
  }
  return issues;
}

/** `ops` without the strings gpuMemoryOperandIssues judges (so that a problem is said once). */
export function withoutStrings(ops: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(ops)
      .filter(([, v]) => typeof v !== 'string')
      .map(([op, v]) => [op, Array.isArray(v) ? v.filter((item) => typeof item !== 'string') : v]),
  );
}

/** The operands of a GPU memory filter in the MB the service compares (figures in GB turned by the rule above). */
export function gpuMemoryInMb(ops: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const tighten = (op: 'gte' | 'gt' | 'lte' | 'lt', mb: number) => {
    const had = out[op];
    const lower = op === 'gte' || op === 'gt';
    out[op] = typeof had === 'number' ? (lower ? Math.max(had, mb) : Math.min(had, mb)) : mb;
  };
  for (const [op, v] of Object.entries(ops)) {
    const gb = gbOf(v);
    if (gb === null) {
      if (op === 'gte' || op === 'gt' || op === 'lte' || op === 'lt') tighten(op, v as number);
      else out[op] = v;
      continue;
    }
    const { low, high } = gbListing(gb);
    if (op === 'gte') tighten('gte', low);
    else if (op === 'gt') tighten('gt', high);
    else if (op === 'lte') tighten('lte', high);
    else if (op === 'lt') tighten('lt', low);
    else if (op === 'eq') {
      tighten('gte', low);
      tighten('lte', high);
    }
  }
  return out;
}

/**
 * `validate`'s warnings: a GPU memory bound in MB at a round figure (N × 1000, or N GiB) that
 * leaves out cards sold as N GB, the card the user likely meant: `gte: 16000` excludes a T4 (15360).
 */
function gpuMemoryWarnings(path: string, field: string, ops: Record<string, unknown>): string[] {
  if (!isGpuMemoryField(field)) return [];
  const warnings: string[] = [];
  for (const [op, v] of Object.entries(ops)) {
    if (typeof v !== 'number' || !COMPARISONS.includes(op)) continue;
    // N x 1000 (the official CLI's conversion) or N GiB for the usual sizes (multiples of 8 GB); not
    // every multiple of 1024, which a listing may be (a 15 GiB T4 lists 15360: no card is sold as 15 GB).
    const gb = v % 1000 === 0 ? v / 1000 : v % 8192 === 0 ? v / 1024 : null;
    if (gb === null || gb < 1) continue;
    const { low, high } = gbListing(gb);
    const lower = op === 'gte' || op === 'gt';
    // A floor above the lowest listing, or a ceiling below the highest, leaves some N GB cards out.
    const excludes = lower ? v > low || (op === 'gt' && v === low) : v < high || (op === 'lt' && v === high);
    if (!excludes) continue;
    const listed = lower ? `from ${low} MB${gb === 16 ? ' (a Tesla T4 lists 15360)' : ''}` : `up to ${high} MB`;
    warnings.push(
      `${path}.${field}.${op}: ${v} MB leaves out cards sold as ${gb} GB, which list ${listed}; ` +
        `write ${op}: "${gb}GB" to count them (docs/job-spec.md, "GPU memory")`,
    );
  }
  return warnings;
}

type Filters = Record<string, Record<string, unknown>>;

/** gpuMemoryWarnings for every GPU memory filter of a parsed spec: its search and its relax steps. */
export function gpuMemorySpecWarnings(spec: {
  search: { filters: Filters };
  relax?: ReadonlyArray<{ set?: Filters | undefined }> | undefined;
}): string[] {
  const of = (path: string, filters: Filters) => Object.entries(filters).flatMap(([field, ops]) => gpuMemoryWarnings(path, field, ops));
  return [...of('search.filters', spec.search.filters), ...(spec.relax ?? []).flatMap((step, i) => of(`relax[${i}].set`, step.set ?? {}))];
}
