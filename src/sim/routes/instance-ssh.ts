// An instance's own SSH keys: attach (attach_ssh.yaml), detach (detach_ssh.yaml) and show
// (show_instance_ssh_keys.yaml), on the paths and bodies the official client sends
// (vast-ai/vast-cli vastai/api/keys.py `attach_ssh`, `detach_ssh`: POST /instances/{id}/ssh/
// `{"ssh_key"}`, DELETE /instances/{id}/ssh/{ssh_key_id}/). An instance authorizes the account's
// keys as they were at its create and the keys attached to it (ssh-keys.ts); its sshd reads them at
// each login, so an attached key works at once and a detached one no more.
// Permissions (permissions.mdx, "Endpoint Reference by Category"): attach and detach are
// instance_write, show is instance_read; the instance's own API key may call none of them.
import type { Route, RouteContext } from '../route.js';
import { SimHttpError } from '../sim-error.js';
import { idParam } from '../validate.js';
import { sshKeyOf } from './account.js';

/** detach_ssh.yaml's 404 errors (show_instance_ssh_keys.yaml's example: `no_such_instance`, "Instance not found."). */
const noSuchInstance = () => new SimHttpError(404, { success: false, error: 'no_such_instance', msg: 'Instance not found.' });
const noSuchKey = () => new SimHttpError(404, { success: false, error: 'no_such_ssh_key', msg: 'SSH key not found.' });

/** The live instance named by the path; a destroyed or unknown one is 404. */
function instanceId({ world, params }: RouteContext, name: string): number {
  const id = idParam(params, name);
  if (!world.instances.get(id)) throw noSuchInstance();
  return id;
}

export const instanceSshRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v0/instances/{id}/ssh',
    auth: 'key',
    category: 'instance_write',
    group: 'instance_ssh',
    limited: 'detail',
    handler: (ctx) => {
      const id = instanceId(ctx, 'id');
      ctx.world.instanceSshKeys.attach(id, sshKeyOf(ctx.body), ctx.world.sshKeys.list());
      return { body: { success: true, msg: 'SSH key attached successfully' } };
    },
  },
  {
    method: 'GET',
    path: '/api/v0/instances/{id}/ssh',
    auth: 'key',
    category: 'instance_read',
    group: 'instance_ssh',
    limited: 'detail',
    // show_instance_ssh_keys.yaml: `ssh_keys` is a string, "JSON string containing array of SSH key objects".
    handler: (ctx) => ({ body: { success: true, ssh_keys: JSON.stringify(ctx.world.instanceSshKeys.list(instanceId(ctx, 'id'))) } }),
  },
  {
    method: 'DELETE',
    path: '/api/v0/instances/{id}/ssh/{ssh_key_id}',
    auth: 'key',
    category: 'instance_write',
    group: 'instance_ssh_detach',
    limited: 'detail',
    handler: (ctx) => {
      const id = instanceId(ctx, 'id');
      if (!ctx.world.instanceSshKeys.detach(id, idParam(ctx.params, 'ssh_key_id'))) throw noSuchKey();
      return { body: { success: true, msg: 'SSH key removed from instance.' } };
    },
  },
];
