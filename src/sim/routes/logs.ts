// Instance logs (logs.yaml): `PUT /api/v0/instances/request_logs/{id}` with an optional
// `{tail, filter, daemon_logs}` answers `{success, result_url, msg}`; the URL (log-uploads.ts)
// serves the text a moment later. Reading logs is `instance_read` (permissions.mdx, "Show Logs").
// `tail` is applied before `filter`, as `docker logs --tail N | grep F` on the host would: the docs
// do not say which comes first, and this order is the stricter for a client looking for one line.
// `tail` is typed a string in logs.yaml; the official client also sends a number
// (vastai/cli/commands/machines.py: `tail=INSTANCE_LOG_TAIL_LINES`, 1000), so both are taken.
// An instance destroyed since answers as its host would: docker's "No such container" line.
import { containerLog, daemonLog, noSuchContainer } from '../container-logs.js';
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
  const id = idParam(params, 'id');
  const inst = world.instances.get(id);
  if (!inst) {
    if (!world.instances.history().some((h) => h.id === id)) return { status: 404, body: INVALID_ID };
    return uploaded(
      world,
      [noSuchContainer(id)].filter((l) => !filter || filter.test(l)),
      true,
    );
  }

  const all =
    o.daemon_logs === 'true'
      ? daemonLog(inst)
      : containerLog(
          inst,
          world.onstart.output(inst.hist.id),
          world.clock.simS(),
          world.config.ssh_listeners,
          world.sshListeners.sshdLines(inst.hist.id),
        );
  const lines = (tail === 0 ? [] : all.slice(-tail)).filter((l) => !filter || filter.test(l));
  // An offline or silent host cannot upload: the URL is given but never fills.
  return uploaded(world, lines, inst.status !== 'offline' && inst.status !== 'unknown');
}

function uploaded(world: RouteContext['world'], lines: string[], uploads: boolean): RouteResult {
  const path = world.logUploads.put(lines, uploads);
  return { body: { success: true, result_url: `${world.simUrl()}${path}`, msg: 'Uploading logs; fetch result_url in a few seconds.' } };
}

function parseTail(v: unknown): number {
  if (v === undefined || v === null) return DEFAULT_TAIL;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 1e9) return v;
  if (typeof v !== 'string' || !/^\d{1,9}$/.test(v.trim()))
    throw invalidArgs('tail must be a number of lines, as a string ("1000") or a number.');
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
