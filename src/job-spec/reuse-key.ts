// The reuse key of a run (issue #51): what a warm instance's next run must share with the run that
// handed it over, so that starting on it in a fresh container is the same as renting one. The
// container is remade from the instance's image, disk, runtype and ports (berth sets the last two
// the same for every run) and the environment the instance was created with: the service's
// update_template may not change env (unverified, docs/choices.md), so env and secrets must be the
// same values, not only the same names. The search's type and filters must be the same as well, so
// the machine meets the taker's filters (the donor's relax level is checked apart: a taker at a
// stricter level does not take it); the price cap is not part of it: the take is priced against the
// taker's own cap and every daemon cap, as a create is. Values are hashed, never stored: the key says
// nothing of the secrets it covers.
import { createHash } from 'node:crypto';
import type { ResolvedJobSpec } from './schema.js';

type KeyFields = Pick<ResolvedJobSpec, 'image' | 'disk_gb' | 'onstart' | 'env' | 'secrets' | 'search'>;

/** Object keys sorted at every depth, so that the same spec written in another order has the same key. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value as Record<string, unknown>)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

/** sha256 hex of what the taker's container must be made from. */
export function reuseKey(spec: KeyFields): string {
  const fields = {
    image: spec.image,
    disk_gb: spec.disk_gb,
    onstart: spec.onstart ?? null,
    env: spec.env ?? {},
    secrets: spec.secrets ?? {},
    search: { type: spec.search.type, filters: spec.search.filters ?? {} },
  };
  return createHash('sha256')
    .update(JSON.stringify(canonical(fields)))
    .digest('hex');
}
