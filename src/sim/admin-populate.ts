// `POST /_sim/populate {"count": N, "label_prefix"?: "other-tool"}`: N instances of somebody else on
// the account at once (label `<prefix>-<i>`, healthy, on free offers), without N rate-limited
// creates. For tests and the benchmark of the instance list at 1,000 instances; admin only.
import type { Route } from './router.js';
import { invalidArgs } from './sim-error.js';
import { bodyObject, num, str } from './validate.js';

const MAX_POPULATE = 20_000;

export const populateRoute: Route = {
  method: 'POST',
  path: '/_sim/populate',
  auth: 'none',
  handler: ({ world, body }) => {
    const b = bodyObject(body);
    const count = num(b, 'count', { min: 0 }) ?? 0;
    if (!Number.isInteger(count) || count > MAX_POPULATE) throw invalidArgs(`count must be an integer from 0 to ${MAX_POPULATE}.`);
    const prefix = str(b, 'label_prefix', { max: 200 }) ?? 'foreign';
    const free = world.catalog.offers.filter((o) => !world.catalog.isRented(o.id));
    if (free.length < count) throw invalidArgs(`only ${free.length} offers are free; make the catalog larger (catalog.size).`);
    const ids: number[] = [];
    for (let i = 0; i < count; i++) {
      const offer = free[i]!;
      const params = {
        image: 'other/tool:latest',
        disk: 10,
        label: `${prefix}-${i}`,
        env: {},
        envPairs: [],
        onstart: '',
        args: [],
        runtype: 'ssh',
        template_hash_id: null,
        price: null,
        ports: [],
      };
      const inst = world.instances.create(offer, params, 'healthy');
      world.catalog.rent(offer.id, inst.hist.id);
      ids.push(inst.hist.id);
    }
    return { body: { success: true, instance_ids: ids } };
  },
};
