// Notification webhooks: list, create, update, delete, rotate-secret. The secret is shown at
// creation and rotation only.
import type { Route, RouteContext, RouteResult } from '../router.js';
import { invalidArgs, notFound } from '../sim-error.js';
import { bodyObject, idParam, str, stringArray, type Json } from '../validate.js';
import { EVENT_TYPES } from '../webhooks.js';

function url(o: Json, required: boolean): string | undefined {
  const v = required ? str(o, 'webhook_url', { required: true, max: 2048 }) : str(o, 'webhook_url', { max: 2048 });
  if (v !== undefined && !/^https?:\/\/[^\s]+$/.test(v)) throw invalidArgs('webhook_url must be an http(s) URL.');
  return v;
}

function eventTypes(o: Json, required: boolean): string[] | undefined {
  const v = stringArray(o, 'event_types');
  if (v === undefined) {
    if (required) throw invalidArgs('event_types is required.');
    return undefined;
  }
  if (v.length === 0) throw invalidArgs('event_types must name at least one event.');
  const unknown = v.find((e) => !(EVENT_TYPES as readonly string[]).includes(e));
  if (unknown) throw invalidArgs(`unknown event type ${unknown}; known: ${EVENT_TYPES.join(', ')}.`);
  return v;
}

function create({ world, body }: RouteContext): RouteResult {
  const o = bodyObject(body);
  const name = str(o, 'name', { max: 256 }) ?? '';
  const webhook = world.webhooks.create(name, url(o, true)!, eventTypes(o, true)!);
  return { body: { success: true, webhook } };
}

function update({ world, body, params }: RouteContext): RouteResult {
  const id = idParam(params, 'id');
  const o = bodyObject(body);
  const patch = { name: str(o, 'name', { max: 256 }), webhook_url: url(o, false), event_types: eventTypes(o, false) };
  const defined = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
  const webhook = world.webhooks.update(id, defined);
  if (!webhook) throw notFound(`No webhook ${id}.`);
  return { body: { success: true, webhook } };
}

export const webhookRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v0/webhooks',
    auth: 'key',
    category: 'user_read',
    handler: ({ world }) => ({ body: { success: true, webhooks: world.webhooks.list() } }),
  },
  { method: 'POST', path: '/api/v0/webhooks', auth: 'key', category: 'user_write', handler: create },
  { method: 'PUT', path: '/api/v0/webhooks/{id}', auth: 'key', category: 'user_write', handler: update },
  {
    method: 'DELETE',
    path: '/api/v0/webhooks/{id}',
    auth: 'key',
    category: 'user_write',
    handler: ({ world, params }) => {
      const id = idParam(params, 'id');
      if (!world.webhooks.delete(id)) throw notFound(`No webhook ${id}.`);
      return { body: { success: true } };
    },
  },
  {
    method: 'POST',
    path: '/api/v0/webhooks/{id}/rotate-secret',
    auth: 'key',
    category: 'user_write',
    handler: ({ world, params }) => {
      const id = idParam(params, 'id');
      const webhook = world.webhooks.rotate(id);
      if (!webhook) throw notFound(`No webhook ${id}.`);
      return { body: { success: true, webhook } };
    },
  },
];
