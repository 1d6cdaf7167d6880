// Cloud connections and the cloud copy (cloud-copies.ts), on the paths and bodies of the official
// client (vast-ai/vast-cli vastai/api/storage.py: `show_connections` GET /users/cloud_integrations/,
// `cloud_copy` POST /commands/rclone/ `{src, dst, instance_id, selected, transfer, flags}`,
// `cancel_sync` DELETE /commands/rclone/ `{client_id: "me", dst_id}`).
// Answers: show_connections.yaml (a bare array of `{id, cloud_type, name}`), cloud_copy.yaml (200
// `{success, msg, result_url}`; 400 `{success, msg}`: no `error` field is documented, so none is
// sent), cancel_sync.yaml (200 `{success, msg}`, 400 `invalid_args` "Invalid dst_id.", 404
// `no_such_instance` "No such instance.").
// Permissions (api-reference/permissions.mdx, "Endpoint Reference by Category"): Show Connections
// is user_read, Cloud Copy and Cancel Sync are instance_write (vast-cli scripts/data/api_scopes.json
// agrees); the instance's own key may call none of them.
import type { Transfer } from '../cloud-copies.js';
import type { Route, RouteContext, RouteResult } from '../route.js';
import { SimHttpError } from '../sim-error.js';
import { bodyObject, type Json } from '../validate.js';

/** cloud_copy.yaml's 400: `{success: false, msg}` only (no `error`). The words are this simulator's. */
class Refused extends Error {}
const refused = (msg: string) => new Refused(msg);

/**
 * The two transfers cloud_copy.yaml names ("Instance To Cloud" or "Cloud To Instance"), read
 * without regard to case: the CLI's own default is "Instance to Cloud" (vast.py `cloud copy`
 * `--transfer`), and its scheduling code compares `args.transfer.lower()`.
 */
function transferOf(v: unknown): Transfer {
  const t = typeof v === 'string' ? v.trim().toLowerCase() : '';
  if (t === 'instance to cloud') return 'Instance To Cloud';
  if (t === 'cloud to instance') return 'Cloud To Instance';
  throw refused(`Invalid transfer type ${JSON.stringify(v)}: use "Instance To Cloud" or "Cloud To Instance".`);
}

/** An id sent as the yaml's string (`"6003036"`, as the CLI sends it) or as a number. */
function idOf(o: Json, field: string): number | null {
  const v = o[field];
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d{1,12}\s*$/.test(v) ? Number(v) : NaN;
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

function pathOf(o: Json, field: 'src' | 'dst'): string {
  const v = o[field];
  if (typeof v !== 'string' || v.trim() === '') throw refused(`${field} must be a path.`);
  return v.trim();
}

async function cloudCopy(ctx: RouteContext): Promise<RouteResult> {
  try {
    return await startCopy(ctx);
  } catch (e) {
    if (e instanceof Refused) return { status: 400, body: { success: false, msg: e.message } };
    throw e;
  }
}

async function startCopy({ world, body }: RouteContext): Promise<RouteResult> {
  const o = bodyObject(body);
  const src = pathOf(o, 'src');
  const dst = pathOf(o, 'dst');
  const transfer = transferOf(o.transfer);
  const flags = o.flags ?? [];
  if (!Array.isArray(flags) || flags.some((f) => typeof f !== 'string')) throw refused('flags must be a list of strings.');
  const connId = idOf(o, 'selected');
  const conn = connId === null ? undefined : world.cloud.connection(connId);
  if (!conn) throw refused(`Invalid cloud connection ${JSON.stringify(o.selected ?? null)}.`);
  const instId = idOf(o, 'instance_id');
  const inst = instId === null ? undefined : world.instances.get(instId);
  if (!inst) throw refused(`Instance ${JSON.stringify(o.instance_id ?? null)} not found.`);
  await world.cloud.start(inst, conn, transfer, src, dst, flags as string[]);
  // cloud_copy.yaml gives the fields, not the words: these are vast.py's after a 200.
  return { body: { success: true, msg: 'Cloud Copy Started - check instance status bar for progress updates (~30 seconds delayed).' } };
}

function cancelSync({ world, body }: RouteContext): RouteResult {
  const o = bodyObject(body);
  const id = idOf(o, 'dst_id');
  if (id === null) throw new SimHttpError(400, { success: false, error: 'invalid_args', msg: 'Invalid dst_id.' });
  if (!world.instances.get(id)) throw new SimHttpError(404, { success: false, error: 'no_such_instance', msg: 'No such instance.' });
  world.cloud.cancel(id);
  return { body: { success: true, msg: 'Remote copy canceled - check instance status bar for progress updates (~30 seconds delayed).' } };
}

export const cloudRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v0/users/cloud_integrations',
    auth: 'key',
    category: 'user_read',
    group: 'cloud_connections',
    limited: 'detail',
    handler: ({ world }) => ({ body: world.cloud.connections.map((c) => ({ id: c.id, name: c.name, cloud_type: c.cloud_type })) }),
  },
  {
    method: 'POST',
    path: '/api/v0/commands/rclone',
    auth: 'key',
    category: 'instance_write',
    group: 'cloud_copy',
    handler: cloudCopy,
  },
  {
    method: 'DELETE',
    path: '/api/v0/commands/rclone',
    auth: 'key',
    category: 'instance_write',
    group: 'cloud_copy',
    handler: cancelSync,
  },
];
