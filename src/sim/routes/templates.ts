// Templates. DELETE takes `{template_id}` with the numeric id; a hash_id there is refused with a
// message that says so, since confusing the two is the quirk clients trip on. Permissions as
// permissions.mdx lists them: search needs user_read, create/edit/delete user_write.
import type { Route, RouteContext, RouteResult } from '../route.js';
import type { TemplateFields } from '../templates.js';
import { invalidArgs, notFound } from '../sim-error.js';
import { bodyObject, bool, num, str, type Json } from '../validate.js';

function fields(o: Json): TemplateFields {
  const out: TemplateFields = {};
  const set = <K extends keyof TemplateFields>(k: K, v: TemplateFields[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set('name', str(o, 'name', { max: 256 }));
  set('image', str(o, 'image', { max: 1024 }));
  set('tag', str(o, 'tag', { max: 256 }));
  set('env', str(o, 'env', { max: 16_384 }));
  set('onstart', str(o, 'onstart', { max: 4048 }));
  set('runtype', str(o, 'runtype', { max: 64 }));
  set('ssh_direct', bool(o, 'ssh_direct'));
  set('jup_direct', bool(o, 'jup_direct'));
  set('use_ssh', bool(o, 'use_ssh'));
  set('private', bool(o, 'private'));
  set('recommended_disk_space', num(o, 'recommended_disk_space', { min: 1 }));
  return out;
}

function create({ world, body }: RouteContext): RouteResult {
  const o = bodyObject(body);
  const name = str(o, 'name', { required: true, max: 256 });
  const image = str(o, 'image', { required: true, max: 1024 });
  const template = world.templates.create({ ...fields(o), name, image });
  return { body: { success: true, msg: `Template Created Successfully! New Template ID: ${template.id}`, template } };
}

function update({ world, body }: RouteContext): RouteResult {
  const o = bodyObject(body);
  const id = num(o, 'id', { integer: true });
  const hashId = str(o, 'hash_id');
  if (id === undefined && hashId === undefined) throw invalidArgs('give the template id (or hash_id) to update.');
  const rec = id !== undefined ? world.templates.get(id) : world.templates.findByHash(hashId!);
  if (!rec) throw notFound(`No template ${id ?? hashId}.`);
  return { body: { success: true, template: world.templates.update(rec, fields(o)) } };
}

function remove({ world, body }: RouteContext): RouteResult {
  const raw = bodyObject(body).template_id;
  if (typeof raw === 'string' && !/^\d+$/.test(raw)) {
    throw invalidArgs('template_id must be the numeric template id, not its hash_id.');
  }
  const id = typeof raw === 'string' ? Number(raw) : raw;
  if (typeof id !== 'number' || !Number.isInteger(id)) throw invalidArgs('template_id must be an integer.');
  if (!world.templates.delete(id)) throw notFound(`No template ${id}.`);
  return { body: { success: true } };
}

export const templateRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v0/template',
    auth: 'key',
    category: 'user_read',
    group: 'templates',
    limited: 'detail',
    handler: ({ world }) => {
      const templates = world.templates.list();
      return { body: { success: true, templates_found: templates.length, templates } };
    },
  },
  { method: 'POST', path: '/api/v0/template', auth: 'key', category: 'user_write', group: 'templates_write', handler: create },
  { method: 'PUT', path: '/api/v0/template', auth: 'key', category: 'user_write', group: 'templates_write', handler: update },
  { method: 'DELETE', path: '/api/v0/template', auth: 'key', category: 'user_write', group: 'templates_write', handler: remove },
];
