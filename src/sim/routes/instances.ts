// The account's instances as read: the lists (v0 here, the paginated v1 in ./instances-v1.ts) and
// show. Changing them (stop/start/label, reboot, bid, destroy) is in manage.ts.
import { instanceRecord } from '../instance-record.js';
import type { Route, RouteContext, RouteResult } from '../route.js';
import { deprecatedEndpoint } from '../sim-error.js';
import { idParam } from '../validate.js';
import { listInstancesV1 } from './instances-v1.js';

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
  {
    method: 'GET',
    path: '/api/v1/instances',
    auth: 'key',
    category: 'instance_read',
    group: 'list_v1',
    handler: listInstancesV1,
    limited: 'detail',
  },
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
