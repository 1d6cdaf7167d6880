// GPU names the service knows: a `gpu_name` filter naming a GPU no machine has matches nothing, and
// used to pass validation and end the run with no_offers (issue #41). The list is the service's
// `GET /api/v0/gpu_names/unique/` (read by the CLI: ../cli/gpu-name-list.ts); this module only
// finds the names a spec uses and the ones the list lacks, with the nearest known name.
import type { SpecIssue } from '../errors.js';
import type { JobSpec } from './schema.js';
import { distance } from './search-fields.js';

/** Operators whose value is a GPU name, or a list of them. */
const NAME_OPS = ['eq', 'neq', 'in', 'notin'] as const;

/** Every GPU name the spec's filters and its relax steps name, with the JSON path of each. */
export function gpuNamesIn(spec: Pick<JobSpec, 'search' | 'relax'>): Array<{ path: string; name: string }> {
  const found: Array<{ path: string; name: string }> = [];
  const read = (ops: unknown, at: string) => {
    if (typeof ops !== 'object' || ops === null) return;
    for (const op of NAME_OPS) {
      const v = (ops as Record<string, unknown>)[op];
      if (typeof v === 'string') found.push({ path: `${at}.${op}`, name: v });
      else if (Array.isArray(v))
        v.forEach((name, i) => {
          if (typeof name === 'string') found.push({ path: `${at}.${op}[${i}]`, name });
        });
    }
  };
  read(spec.search.filters['gpu_name'], '$.search.filters.gpu_name');
  (spec.relax ?? []).forEach((step, i) => read(step.set?.['gpu_name'], `$.relax[${i}].set.gpu_name`));
  return found;
}

/** The known name nearest to `name` (case and spaces aside), when one is close enough to be a typo. */
function nearestGpuName(name: string, known: readonly string[]): string | undefined {
  const key = (s: string) => s.toLowerCase().replace(/[\s_-]+/g, ' ');
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const d = distance(key(name), key(k));
    if (d < bestD) {
      best = k;
      bestD = d;
    }
  }
  return bestD <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined;
}

/** One problem per GPU name of the spec that `known` lacks: `"RTX 4900" is not a GPU the service knows; did you mean "RTX 4090"?` */
export function unknownGpuNameIssues(spec: Pick<JobSpec, 'search' | 'relax'>, known: readonly string[]): SpecIssue[] {
  const names = new Set(known);
  return gpuNamesIn(spec)
    .filter((n) => !names.has(n.name))
    .map(({ path, name }) => {
      const near = nearestGpuName(name, known);
      return {
        path,
        message: `${JSON.stringify(name)} is not a GPU the service knows${near ? `; did you mean ${JSON.stringify(near)}?` : ' (its list: GET /api/v0/gpu_names/unique/)'}`,
      };
    });
}
