// Changing an instance: manage (stop, start, label), reboot, change bid and destroy, with the
// bodies their yamls document (manage_instance, stop/start/label_instance, reboot_instance,
// change_bid, destroy_instance), and the official client's bulk destroy (no yaml). Manage and
// destroy also accept the instance's own restricted key, for a state change or destroy of that
// instance only (the bulk destroy does not).
// The `unsuccessful_200_rate` fault answers 200 `{success: false, ...}` before anything is done:
// the official CLI prints `msg` and goes on, so a client must read `success`, not just the status.
import type { LiveInstance } from '../instances.js';
import type { Route, RouteContext, RouteResult } from '../route.js';
import {
  bidNoSuchInstance,
  destroyInvalidId,
  destroyNotFound,
  invalidArgs,
  labelTooLong,
  missingBilling,
  noSuchInstance,
  permissionDenied,
  type SimHttpError,
} from '../sim-error.js';
import { bodyObject, idParam } from '../validate.js';

const LABEL_MAX = 1024;
/** change_bid.yaml: 0.001 ≤ price ≤ 32 × the instance's GPUs. */
const BID_MIN = 0.001;
const BID_MAX_PER_GPU = 32;

const UNSUCCESSFUL = { success: false, error: 'request_failed', msg: 'error 200/3999: The request could not be completed; try again.' };

/** The live instance the caller may act on, or `missing()`. An instance key acts on its own instance only. */
function target(
  ctx: RouteContext,
  missing: (id: number) => SimHttpError,
  instanceKeyMay: (body: Record<string, unknown>) => boolean,
): LiveInstance {
  const id = idParam(ctx.params, 'id');
  const p = ctx.principal;
  if (p?.kind === 'instance' && (p.instanceId !== id || !instanceKeyMay(bodyObject(ctx.body, true)))) {
    throw permissionDenied('instance_write', 'an instance key may only start, stop or destroy its own instance');
  }
  const inst = ctx.world.instances.get(id);
  if (!inst) throw missing(id);
  return inst;
}

function manage(ctx: RouteContext): RouteResult {
  const body = bodyObject(ctx.body);
  const inst = target(ctx, noSuchInstance, (b) => Object.keys(b).every((k) => k === 'state'));
  const { state, label } = body;
  const hasLabel = 'label' in body;
  if (state === undefined && !hasLabel) throw invalidArgs('nothing to change: give state ("stopped" or "running") or label.');
  if (state !== undefined && state !== 'stopped' && state !== 'running') {
    throw invalidArgs(`state must be "stopped" or "running", got ${JSON.stringify(state)}.`);
  }
  if (hasLabel && typeof label !== 'string') throw invalidArgs('label must be a string.');
  if (typeof label === 'string' && label.length > LABEL_MAX) throw labelTooLong();
  if (state === 'running' && ctx.world.credit() <= 0) throw missingBilling();
  if (ctx.world.faults.unsuccessful()) return { body: UNSUCCESSFUL };

  const id = inst.hist.id;
  const msgs: string[] = [];
  if (typeof label === 'string') {
    inst.hist.label = label;
    msgs.push(`label for ${id} set to '${label}'`);
  }
  if (state === 'stopped') ctx.world.instances.stop(inst);
  if (state === 'running' && ctx.world.faults.startStaysQueued()) {
    msgs.push(`start of instance ${id} queued: its machine has no free GPU now`);
  } else if (state === 'running') {
    // A losing bid stays stopped until it wins (the market falls or change_bid raises it).
    if (ctx.world.instances.start(inst)) msgs.push(`starting instance ${id}`);
    else msgs.push(`instance ${id} stays stopped until its bid wins: its bid is below the minimum bid ${inst.offer.min_bid}`);
  }
  // stop_instance.yaml answers `{success}` alone; start and label answer `{success, msg}`.
  return { body: msgs.length === 0 ? { success: true } : { success: true, msg: `${msgs.join('; ')}.` } };
}

function reboot(ctx: RouteContext): RouteResult {
  const inst = target(
    ctx,
    () => invalidArgs('invalid instance_id'),
    () => false,
  );
  if (inst.intended === 'stopped' || inst.status === 'stopped')
    throw invalidArgs(`instance ${inst.hist.id} is stopped; start it instead of rebooting it.`);
  if (ctx.world.faults.unsuccessful()) return { body: UNSUCCESSFUL };
  ctx.world.instances.reboot(inst);
  return { body: { success: true } };
}

function changeBid(ctx: RouteContext): RouteResult {
  const body = bodyObject(ctx.body);
  const inst = target(ctx, bidNoSuchInstance, () => false);
  if (body.client_id !== 'me') throw invalidArgs('client_id is required and must be "me".');
  const price = typeof body.price === 'string' && body.price.trim() !== '' ? Number(body.price) : body.price;
  const max = BID_MAX_PER_GPU * inst.offer.num_gpus;
  if (typeof price !== 'number' || !Number.isFinite(price) || price < BID_MIN) throw invalidArgs(`Please set a bid price >= ${BID_MIN}.`);
  if (price > max) throw invalidArgs(`Please set a bid price <= ${max} (32.0 per GPU).`);
  if (!inst.hist.is_bid) throw invalidArgs(`instance ${inst.hist.id} is on-demand; only interruptible instances have a bid.`);
  ctx.world.instances.changeBid(inst, price);
  return { body: { success: true } };
}

/**
 * destroy_instance.yaml documents 404 `not_found` "Instance not found" and 400 `invalid_args`
 * "invalid instance_id" without saying which an instance already destroyed gets: the stricter
 * reading is the 400 (a client taking it for a refusal retries for ever); an id this account never
 * had is the 404.
 */
function destroyMissing(ctx: RouteContext): (id: number) => SimHttpError {
  return (id) => (ctx.world.instances.history().some((h) => h.id === id) ? destroyInvalidId() : destroyNotFound());
}

function destroy(ctx: RouteContext): RouteResult {
  const inst = target(ctx, destroyMissing(ctx), () => true);
  if (ctx.world.faults.unsuccessful()) return { body: UNSUCCESSFUL };
  ctx.world.instances.destroy(inst);
  return { body: { success: true, msg: 'Instance destroyed successfully' } };
}

/** vast-cli `destroy__instances` sends at most this many ids a call (`split_list(args.ids, 64)`). */
const BULK_MAX = 64;

/**
 * The official client's bulk destroy: vast-cli `vastai/api/instances.py` `destroy_instance` sends
 * `DELETE /instances/` with `{"instance_ids": [...]}` when given a list, and `destroy__instances`
 * (`vastai/cli/commands/instances.py`) sends at most 64 ids a call and reads `success`. No yaml
 * documents it, so all of this is the strictest reading: the account's key only (the instance key
 * may destroy its own instance only, by the single route); 1 to 64 distinct integer ids, else 400
 * `invalid_args`; any id that is not a live instance of the caller's is destroy_instance.yaml's 404
 * `not_found` and nothing is destroyed (a client must fall back to destroys one by one); otherwise
 * every instance is destroyed as the single route does it and the answer is `{success, msg}`.
 */
function destroyMany(ctx: RouteContext): RouteResult {
  const ids = bodyObject(ctx.body).instance_ids;
  if (
    !Array.isArray(ids) ||
    ids.length < 1 ||
    ids.length > BULK_MAX ||
    !ids.every((id) => Number.isSafeInteger(id) && (id as number) > 0) ||
    new Set(ids).size !== ids.length
  ) {
    throw invalidArgs(`instance_ids must be a list of 1 to ${BULK_MAX} distinct instance ids.`);
  }
  const instances = (ids as number[]).map((id) => ctx.world.instances.get(id));
  if (instances.some((inst) => inst === undefined)) throw destroyNotFound();
  if (ctx.world.faults.unsuccessful()) return { body: UNSUCCESSFUL };
  for (const inst of instances) ctx.world.instances.destroy(inst!);
  return { body: { success: true, msg: `Instances ${ids.join(', ')} destroyed successfully` } };
}

export const manageRoutes: Route[] = [
  {
    method: 'PUT',
    path: '/api/v0/instances/{id}',
    auth: 'key',
    category: 'instance_write',
    group: 'change',
    limited: 'detail',
    instanceKey: true,
    handler: manage,
  },
  {
    method: 'DELETE',
    path: '/api/v0/instances/{id}',
    auth: 'key',
    category: 'instance_write',
    group: 'destroy',
    limited: 'success_error',
    instanceKey: true,
    handler: destroy,
  },
  {
    method: 'DELETE',
    path: '/api/v0/instances',
    auth: 'key',
    category: 'instance_write',
    group: 'destroy_bulk',
    limited: 'success_error',
    handler: destroyMany,
  },
  {
    method: 'PUT',
    path: '/api/v0/instances/reboot/{id}',
    auth: 'key',
    category: 'instance_write',
    group: 'reboot',
    limited: 'detail',
    handler: reboot,
  },
  {
    method: 'PUT',
    path: '/api/v0/instances/bid_price/{id}',
    auth: 'key',
    category: 'instance_write',
    group: 'change_bid',
    limited: 'detail',
    handler: changeBid,
  },
];
