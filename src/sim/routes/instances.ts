// The account's instances as read: the lists (v0 and paginated v1) and show. Changing them
// (stop/start/label, reboot, bid, destroy) is in manage.ts.
import { instanceRecord } from '../instance-record.js';
import type { Route, RouteContext, RouteResult } from '../router.js';
import { deprecatedEndpoint, invalidArgs } from '../sim-error.js';
import { idParam } from '../validate.js';

const V1_PAGE = 25;
const V1_MAX_PAGE = 100;

function listV1(ctx: RouteContext): RouteResult {
  const rawLimit = ctx.query.get('limit');
  const limit = rawLimit === null ? V1_PAGE : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > V1_MAX_PAGE) {
    throw invalidArgs(`limit must be an integer from 1 to ${V1_MAX_PAGE}.`);
  }
  const after = decodeToken(ctx.query.get('after_token'));
  ctx.world.syncMinBids();
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

/**
 * The undocumented v0 list, in the mode the config picks: the old answer for old clients, 410
 * `deprecated_endpoint` as the service rolls out per account (the default), or a plain 404.
 */
function listV0({ world }: RouteContext): RouteResult {
  if (world.config.v0_list === '410') throw deprecatedEndpoint();
  // A route that is gone answers like one that never existed: no JSON body.
  if (world.config.v0_list === '404') return { status: 404, text: 'Not Found' };
  world.syncMinBids();
  const instances = world.instances.list().map(instanceRecord);
  return { body: { instances_found: instances.length, instances } };
}

export const instanceRoutes: Route[] = [
  { method: 'GET', path: '/api/v0/instances', auth: 'key', category: 'instance_read', group: 'list_v0', handler: listV0 },
  { method: 'GET', path: '/api/v1/instances', auth: 'key', category: 'instance_read', group: 'list_v1', handler: listV1, limited: 'detail' },
  {
    method: 'GET',
    path: '/api/v0/instances/{id}',
    auth: 'key',
    category: 'instance_read',
    group: 'show',
    limited: 'detail',
    handler: (ctx) => {
      // An unknown id is not an error here: the service answers `instances: null`.
      ctx.world.syncMinBids();
      const inst = ctx.world.instances.get(idParam(ctx.params, 'id'));
      return { body: { instances: inst ? instanceRecord(inst) : null } };
    },
  },
];
