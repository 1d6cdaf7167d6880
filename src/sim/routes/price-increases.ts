// Pending price increases (vast-cli `vastai/api/price_increase.py` and its tests; not in the docs
// yet): the list, and accept/reject with a body of exactly `{"pending_price_increase_id": N}` (the
// service forbids extra keys: 400). A row that is not pending is 404 `no_pending_price_increase`.
// Declared before the instance routes: `/api/v0/instances/{id}` would take these paths otherwise.
import type { Route, RouteContext, RouteResult } from '../route.js';
import { invalidArgs, SimHttpError } from '../sim-error.js';
import { bodyObject } from '../validate.js';

function list({ world }: RouteContext): RouteResult {
  const rows = world.priceIncreases.pending((id) => world.instances.get(id) !== undefined);
  return { body: { success: true, count: rows.length, truncated: false, pending_price_increases: rows } };
}

function answer(kind: 'accept' | 'reject') {
  return ({ world, body }: RouteContext): RouteResult => {
    const o = bodyObject(body);
    const extra = Object.keys(o).filter((k) => k !== 'pending_price_increase_id');
    if (extra.length > 0) throw invalidArgs(`unexpected field ${extra[0]}: the body is exactly {"pending_price_increase_id": N}.`);
    const id = o.pending_price_increase_id;
    if (typeof id !== 'number' || !Number.isInteger(id) || id <= 0)
      throw invalidArgs('pending_price_increase_id must be a positive integer.');
    const done = world.answerPriceIncrease(id, kind);
    if (!done) throw new SimHttpError(404, { success: false, error: 'no_pending_price_increase', msg: `No pending price increase ${id}.` });
    return { body: { success: true, pending_price_increase_id: id, contract_id: done.contract_id } };
  };
}

export const priceIncreaseRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v0/instances/pending-price-increases',
    auth: 'key',
    category: 'instance_read',
    group: 'user',
    handler: list,
  },
  {
    method: 'PUT',
    path: '/api/v0/instances/accept-price-increase',
    auth: 'key',
    category: 'instance_write',
    group: 'change',
    limited: 'detail',
    handler: answer('accept'),
  },
  {
    method: 'PUT',
    path: '/api/v0/instances/reject-price-increase',
    auth: 'key',
    category: 'instance_write',
    group: 'change',
    limited: 'detail',
    handler: answer('reject'),
  },
];
