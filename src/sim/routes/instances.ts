// The account's instances: lists (v0 and paginated v1), show, change (stop/start/label), destroy.
// Change and destroy also accept the instance's own restricted key, for that instance only.
import { instanceRecord } from '../instance-record.js';
import type { LiveInstance } from '../instances.js';
import type { Route, RouteContext, RouteResult } from '../router.js';
import { deprecatedEndpoint, invalidArgs, noSuchInstance, permissionDenied } from '../sim-error.js';
import { bodyObject, idParam, str } from '../validate.js';

const V1_PAGE = 25;
const V1_MAX_PAGE = 100;

/** The live instance the caller may act on, or the service's error. */
function target(ctx: RouteContext, allowedForInstanceKey: (body: Record<string, unknown>) => boolean): LiveInstance {
  const id = idParam(ctx.params, 'id');
  const p = ctx.principal;
  if (p?.kind === 'instance' && (p.instanceId !== id || !allowedForInstanceKey(bodyObject(ctx.body, true)))) {
    throw permissionDenied('instance_write', 'an instance key may only start, stop or destroy its own instance');
  }
  const inst = ctx.world.instances.get(id);
  if (!inst) throw noSuchInstance(id);
  return inst;
}

function change(ctx: RouteContext): RouteResult {
  const body = bodyObject(ctx.body);
  const inst = target(ctx, (b) => Object.keys(b).every((k) => k === 'state'));
  const state = body.state;
  const hasLabel = 'label' in body;
  if (state === undefined && !hasLabel) throw invalidArgs('nothing to change: give state ("stopped" or "running") or label.');
  if (state !== undefined && state !== 'stopped' && state !== 'running') {
    throw invalidArgs(`state must be "stopped" or "running", got ${JSON.stringify(state)}.`);
  }
  const label = hasLabel ? (str(body, 'label', { max: 1024 }) ?? null) : undefined;
  if (label !== undefined) inst.hist.label = label;
  if (state === 'stopped') ctx.world.instances.stop(inst);
  if (state === 'running') ctx.world.instances.start(inst);
  return { body: { success: true } };
}

function destroy(ctx: RouteContext): RouteResult {
  const inst = target(ctx, () => true);
  ctx.world.instances.destroy(inst);
  return { body: { success: true } };
}

function listV1(ctx: RouteContext): RouteResult {
  const rawLimit = ctx.query.get('limit');
  const limit = rawLimit === null ? V1_PAGE : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > V1_MAX_PAGE) {
    throw invalidArgs(`limit must be an integer from 1 to ${V1_MAX_PAGE}.`);
  }
  const after = decodeToken(ctx.query.get('after_token'));
  const all = ctx.world.instances.list();
  const rest = all.filter((i) => i.hist.id > after);
  const page = rest.slice(0, limit);
  const more = rest.length > page.length;
  return {
    body: {
      success: true,
      instances_found: page.length,
      total_instances: all.length,
      next_token: more ? encodeToken(page.at(-1)!.hist.id) : null,
      instances: page.map(instanceRecord),
    },
  };
}

/** Tokens are opaque to clients; here the last id of the page seen. */
function encodeToken(lastId: number): string {
  return Buffer.from(JSON.stringify({ after: lastId })).toString('base64url');
}

function decodeToken(token: string | null): number {
  if (token === null || token === '') return 0;
  try {
    const { after } = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { after?: unknown };
    if (typeof after === 'number' && Number.isInteger(after)) return after;
  } catch {
    // Fall through to the error below.
  }
  throw invalidArgs('after_token is not a token this service issued.');
}

export const instanceRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v0/instances',
    auth: 'key',
    category: 'instance_read',
    group: 'list_v0',
    handler: ({ world }) => {
      if (world.config.deprecate_v0_list) throw deprecatedEndpoint();
      const instances = world.instances.list().map(instanceRecord);
      return { body: { instances_found: instances.length, instances } };
    },
  },
  { method: 'GET', path: '/api/v1/instances', auth: 'key', category: 'instance_read', group: 'list_v1', handler: listV1 },
  {
    method: 'GET',
    path: '/api/v0/instances/{id}',
    auth: 'key',
    category: 'instance_read',
    group: 'show',
    handler: (ctx) => {
      // An unknown id is not an error here: the service answers `instances: null`.
      const inst = ctx.world.instances.get(idParam(ctx.params, 'id'));
      return { body: { instances: inst ? instanceRecord(inst) : null } };
    },
  },
  { method: 'PUT', path: '/api/v0/instances/{id}', auth: 'key', category: 'instance_write', group: 'change', instanceKey: true, handler: change },
  { method: 'DELETE', path: '/api/v0/instances/{id}', auth: 'key', category: 'instance_write', group: 'destroy', instanceKey: true, handler: destroy },
];
