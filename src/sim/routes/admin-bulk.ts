// `POST /_sim/instances/bulk` (admin): fills the account with other people's work, so that a
// benchmark or test can run berth beside 1,000 instances it does not own. Each one holds a free
// offer (the lowest `score` first, so that a default search still finds the best offers),
// carries the label `<label_prefix><n>`, sits in `status` for good and is billed like any other.
// No events are sent, no listeners opened and no onstart run: they were there before.
import type { Route } from '../route.js';
import { invalidArgs } from '../sim-error.js';
import { bodyObject, num, str } from '../validate.js';
import type { SimWorld } from '../world.js';

const STATUSES = ['running', 'loading', 'stopped', 'exited', 'unknown', 'offline'] as const;
type SettledStatus = (typeof STATUSES)[number];
const MAX_COUNT = 10_000;

export interface BulkRequest {
  count: number;
  labelPrefix: string;
  status: SettledStatus;
}

/** Creates the instances; throws invalid_args when too few offers are free. Returns their ids. */
export function addForeignInstances(world: SimWorld, req: BulkRequest): number[] {
  const free = world.catalog.offers.filter((o) => !world.catalog.isRented(o.id)).sort((a, b) => a.score - b.score || a.id - b.id);
  if (free.length < req.count) throw invalidArgs(`only ${free.length} offers are free; raise catalog.size for ${req.count} instances.`);
  return free.slice(0, req.count).map((offer, i) => {
    const inst = world.instances.createSettled(
      offer,
      {
        image: 'foreign/workload:latest',
        disk: 8,
        label: `${req.labelPrefix}${i + 1}`,
        env: {},
        envPairs: [],
        onstart: '',
        args: [],
        runtype: 'ssh',
        template_hash_id: null,
        template_id: null,
        price: null,
        ports: [],
      },
      req.status,
    );
    world.catalog.rent(offer.id, inst.hist.id);
    return inst.hist.id;
  });
}

export function parseBulk(body: unknown): BulkRequest {
  const o = bodyObject(body);
  const count = num(o, 'count', { integer: true, min: 1 });
  if (count === undefined || count > MAX_COUNT) throw invalidArgs(`count must be an integer from 1 to ${MAX_COUNT}.`);
  const status = str(o, 'status') ?? 'running';
  if (!(STATUSES as readonly string[]).includes(status)) throw invalidArgs(`status must be one of ${STATUSES.join(', ')}.`);
  return { count, labelPrefix: str(o, 'label_prefix', { max: 200 }) ?? 'foreign-', status: status as SettledStatus };
}

export const bulkAdminRoutes: Route[] = [
  {
    method: 'POST',
    path: '/_sim/instances/bulk',
    auth: 'none',
    handler: ({ world, body }) => ({ body: { success: true, instance_ids: addForeignInstances(world, parseBulk(body)) } }),
  },
];
