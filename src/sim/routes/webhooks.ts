// Notification webhooks (notifications.yaml, notification-webhooks.mdx): list, create, update,
// delete, rotate-secret and test. The secret is shown at creation and rotation only. Limits: 4
// webhooks per user, HTTPS URLs of at most 2048 characters with a hostname (plain http only to a
// loopback host: the simulator's deviation, so tests can receive), names of at most 120 characters
// without control characters, at least one known event key.
import type { Route, RouteContext, RouteResult } from '../route.js';
import { invalidArgs, notFound } from '../sim-error.js';
import { bodyObject, idParam, stringArray, type Json } from '../validate.js';
import { EVENT_TYPES, isLoopbackHost } from '../webhooks.js';

const URL_MAX = 2048;
const NAME_MAX = 120;

function url(o: Json, required: boolean): string | undefined {
  const v = o.webhook_url;
  if (v === undefined || v === null) {
    if (required) throw invalidArgs('webhook_url is required.');
    return undefined;
  }
  if (typeof v !== 'string') throw invalidArgs('webhook_url must be a string.');
  if (v.length > URL_MAX) throw invalidArgs(`webhook_url is longer than ${URL_MAX} characters.`);
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw invalidArgs('webhook_url must be an https:// URL with a hostname.');
  }
  // WHATWG URL parsing forgives "https:///host"; the written URL must name its host itself.
  if (parsed.hostname === '' || !/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]+/i.test(v)) throw invalidArgs('webhook_url must include a hostname.');
  const https = parsed.protocol === 'https:';
  const loopbackHttp = parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname);
  if (!https && !loopbackHttp) throw invalidArgs('webhook_url must use https://.');
  return v;
}

function name(o: Json): string | null | undefined {
  const v = o.name;
  if (v === undefined) return undefined;
  if (v === null) return null;
  if (typeof v !== 'string') throw invalidArgs('name must be a string.');
  if (v.length > NAME_MAX) throw invalidArgs(`name is longer than ${NAME_MAX} characters.`);
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(v)) throw invalidArgs('name must not contain control characters.');
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
  return [...new Set(v)];
}

function create({ world, body }: RouteContext): RouteResult {
  const o = bodyObject(body);
  const hookUrl = url(o, true)!;
  const types = eventTypes(o, true)!;
  const hookName = name(o) ?? null;
  if (world.webhooks.count() >= world.config.webhooks.max_per_user) {
    throw invalidArgs(`at most ${world.config.webhooks.max_per_user} webhooks per user; delete one first.`);
  }
  const webhook = world.webhooks.create(hookName, hookUrl, types);
  return { body: { success: true, webhook, enabled_notification_preferences: types } };
}

function update({ world, body, params }: RouteContext): RouteResult {
  const id = idParam(params, 'id');
  const o = bodyObject(body);
  const patch = { name: name(o), webhook_url: url(o, false), event_types: eventTypes(o, false) };
  const defined = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
  const webhook = world.webhooks.update(id, defined);
  if (!webhook) throw notFound(`No webhook ${id}.`);
  return { body: { success: true, webhook, enabled_notification_preferences: webhook.event_types } };
}

const hooks = (method: Route['method'], path: string, category: string, handler: Route['handler']): Route => ({
  method,
  path: `/api/v0/webhooks${path}`,
  auth: 'key',
  category,
  group: 'webhooks',
  handler,
});

export const webhookRoutes: Route[] = [
  hooks('GET', '', 'user_read', ({ world }) => ({ body: { success: true, webhooks: world.webhooks.list() } })),
  hooks('POST', '', 'user_write', create),
  hooks('PUT', '/{id}', 'user_write', update),
  hooks('DELETE', '/{id}', 'user_write', ({ world, params }) => {
    const id = idParam(params, 'id');
    if (!world.webhooks.delete(id)) throw notFound(`No webhook ${id}.`);
    return { body: { success: true } };
  }),
  hooks('POST', '/{id}/rotate-secret', 'user_write', ({ world, params }) => {
    const id = idParam(params, 'id');
    const webhook = world.webhooks.rotate(id);
    if (!webhook) throw notFound(`No webhook ${id}.`);
    return { body: { success: true, webhook } };
  }),
  hooks('POST', '/{id}/test', 'user_write', ({ world, params }) => {
    const id = idParam(params, 'id');
    if (!world.webhooks.test(id)) throw notFound(`No webhook ${id}.`);
    return { body: { success: true, msg: 'Test webhook delivered' } };
  }),
];
