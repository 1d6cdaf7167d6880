// Instance logs (logs.yaml): `PUT /api/v0/instances/request_logs/{id}` with an optional
// `{tail, filter, daemon_logs}` answers `{success, result_url, msg}`; the URL (log-uploads.ts)
// serves the text a moment later. Reading logs is `instance_read` (permissions.mdx, "Show Logs").
// `tail` is applied before `filter`, as `docker logs --tail N | grep F` on the host does.
import { containerLog, daemonLog } from '../container-logs.js';
import type { Route, RouteContext, RouteResult } from '../route.js';
import { invalidArgs } from '../sim-error.js';
import { bodyObject, idParam } from '../validate.js';

/** The CLI's documented default of --tail. */
const DEFAULT_TAIL = 1000;
/** logs.yaml's 404, verbatim. */
const INVALID_ID = { error: 'invalid_id', msg: 'Invalid instance id.' };

function requestLogs({ world, params, body }: RouteContext): RouteResult {
  const o = bodyObject(body, true);
  const tail = parseTail(o.tail);
  const filter = parseFilter(o.filter);
  if (o.daemon_logs !== undefined && o.daemon_logs !== null && o.daemon_logs !== 'true')
    throw invalidArgs('daemon_logs must be "true" or absent.');
  const inst = world.instances.get(idParam(params, 'id'));
  if (!inst) return { status: 404, body: INVALID_ID };

  const all =
    o.daemon_logs === 'true'
      ? daemonLog(inst)
      : containerLog(inst, world.onstart.output(inst.hist.id), world.clock.simS(), world.config.ssh_listeners);
  const lines = (tail === 0 ? [] : all.slice(-tail)).filter((l) => !filter || filter.test(l));
  // An offline or silent host cannot upload: the URL is given but never fills.
  const uploads = inst.status !== 'offline' && inst.status !== 'unknown';
  const path = world.logUploads.put(lines, uploads);
  return { body: { success: true, result_url: `${world.simUrl()}${path}`, msg: 'Uploading logs; fetch result_url in a few seconds.' } };
}

function parseTail(v: unknown): number {
  if (v === undefined || v === null) return DEFAULT_TAIL;
  if (typeof v !== 'string' || !/^\d{1,9}$/.test(v.trim()))
    throw invalidArgs('tail must be a string holding a number of lines, e.g. "1000".');
  return Number(v.trim());
}

function parseFilter(v: unknown): RegExp | null {
  if (v === undefined || v === null || v === '') return null;
  if (typeof v !== 'string') throw invalidArgs('filter must be a string.');
  try {
    return new RegExp(v);
  } catch {
    throw invalidArgs('filter is not a valid pattern.');
  }
}

export const logRoutes: Route[] = [
  {
    method: 'PUT',
    path: '/api/v0/instances/request_logs/{id}',
    auth: 'key',
    category: 'instance_read',
    group: 'logs',
    handler: requestLogs,
  },
];
