// The HTTP front: one pipeline for every API request, in the order the service would meet it:
//   count → injected latency → dropped socket / injected 5xx → route → body → rate limit (429,
//   by identity, whether or not the key is valid) → key (401; 404 auth_error on search) →
//   permission (403) → handler → list fault (`instances: null`) → record quirks (padded strings,
//   -1 for unknown: ./quirks.ts) → malformed record fault.
// Admin routes (/_sim/) skip faults, keys and limits, and 404 unless enabled. Uploaded logs
// (/_logs/) are another service (S3): no key, no faults, no limits. No request can crash
// the process: anything unexpected becomes a 500 with the generic error body.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { authenticate, hasCategory, identityKey, presentedKey, type Principal } from './auth.js';
import { sendJson, sendText } from '../http/body.js';
import { Router } from '../http/router.js';
import { parseJsonBody, readSimBody } from './http-io.js';
import { LOGS_PATH } from './log-uploads.js';
import { malformFirstRecord } from './malformed-records.js';
import { quirkInstanceRecords } from './quirks.js';
import type { Route } from './route.js';
import { AUTH_ERROR, invalidRequest, LOGIN_REQUIRED, methodNotAllowed, permissionDenied, SimHttpError } from './sim-error.js';
import { bump, countAnswer } from './stats.js';
import type { SimWorld } from './world.js';

export interface ServerDeps {
  world(): SimWorld;
  apiRoutes: Route[];
  adminRoutes: Route[];
  adminEnabled: boolean;
}

const NO_ROUTE = { success: false, error: 'not_found', msg: 'error 404/3100: no such endpoint' };

export function createSimServer(deps: ServerDeps): Server {
  const unlimited = deps.apiRoutes.find((r) => r.group === undefined);
  if (unlimited) throw new Error(`route ${unlimited.method} ${unlimited.path} has no rate-limit group`);
  const api = new Router<Route>(deps.apiRoutes);
  const admin = new Router<Route>(deps.adminRoutes);
  const server = createServer((req, res) => {
    handle(deps, api, admin, req, res).catch((err: unknown) => answerError(res, err));
  });
  // Many short-lived test clients: do not let idle keep-alive sockets hold close() back.
  server.keepAliveTimeout = 5_000;
  return server;
}

async function handle(
  deps: ServerDeps,
  api: Router<Route>,
  admin: Router<Route>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const world = deps.world();
  const url = new URL(req.url ?? '/', 'http://sim.invalid');
  const method = req.method ?? 'GET';
  const isAdmin = url.pathname === '/_sim' || url.pathname.startsWith('/_sim/');

  if (url.pathname.startsWith(LOGS_PATH)) {
    if (method !== 'GET') return sendText(res, 405, 'Method Not Allowed');
    const got = world.logUploads.get(url.pathname);
    res.writeHead(got.status, { 'content-type': got.contentType, 'content-length': Buffer.byteLength(got.body) });
    return void res.end(got.body);
  }

  if (isAdmin) {
    if (!deps.adminEnabled) return sendJson(res, 404, NO_ROUTE);
    const m = safeMatch(admin, method, url.pathname);
    if (m.kind !== 'found')
      return sendJson(res, m.kind === 'method' ? 405 : 404, m.kind === 'method' ? methodNotAllowed(method).body : NO_ROUTE);
    const body = parseJsonBody(await readSimBody(req));
    const result = await m.route.handler({ world, principal: undefined, params: m.params, query: url.searchParams, body });
    if ('drop' in result) return void req.socket.destroy();
    if ('text' in result) return sendText(res, result.status, result.text);
    return sendJson(res, result.status ?? 200, result.body);
  }

  const m = safeMatch(api, method, url.pathname);
  const name = m.kind === 'none' ? 'unmatched' : m.name;
  bump(world.stats.requests, name);
  const send = (status: number, body: unknown) => {
    countAnswer(world.stats, name, status);
    sendJson(res, status, body);
  };

  const latency = world.faults.latencyMs();
  if (latency > 0) await sleep(latency);
  const fault = world.faults.transport();
  if (fault?.kind === 'drop') {
    world.stats.drops++;
    req.socket.destroy();
    return;
  }
  if (fault?.kind === 'error') {
    world.stats.injected_5xx++;
    return send(fault.status, { success: false, error: 'server_error', msg: `error ${fault.status}/0: injected fault` });
  }
  if (m.kind === 'none') return send(404, NO_ROUTE);
  if (m.kind === 'method') return send(405, methodNotAllowed(method).body);

  try {
    const text = await readSimBody(req);
    const route = m.route;
    const group = route.group!;
    const verdict = world.limiter.take(group, name, identityKey(req, url.searchParams));
    if (!verdict.ok) {
      bump(world.stats.rate_limited, name);
      countAnswer(world.stats, name, 429);
      const plain = world.config.rate_limits.plain_text;
      return tooFrequent(res, plain ? 'plain' : (route.limited ?? 'plain'), plain ? null : verdict.threshold);
    }
    const principal = authenticate(presentedKey(req, url.searchParams), world.keys, (k) => world.instances.ownerOfKey(k));
    if (route.auth === 'key') {
      const noKeyGiven = req.headers.authorization === undefined && !url.searchParams.has('api_key');
      if (!principal && noKeyGiven && route.missingKey403) return send(403, LOGIN_REQUIRED);
      if (!principal) {
        const status = route.badKey404 || world.faults.badKey404Everywhere() ? 404 : 401;
        // search_offers.yaml documents the 404 as `{"msg": "Invalid user key"}` alone.
        return send(status, status === 404 && world.config.quirks.bad_key_msg_only ? { msg: AUTH_ERROR.msg } : AUTH_ERROR);
      }
      checkPermission(route, principal);
    }
    const body = parseJsonBody(text);
    const result = await route.handler({ world, principal, params: m.params, query: url.searchParams, body });
    if ('drop' in result) {
      req.socket.destroy();
      return;
    }
    if ('text' in result) {
      countAnswer(world.stats, name, result.status);
      return sendText(res, result.status, result.text);
    }
    if ((group === 'list_v0' || group === 'list_v1') && (result.status ?? 200) === 200 && world.faults.nullInstances()) {
      // The official clients read `instances: null` as an empty page; a client must survive it.
      return send(result.status ?? 200, { ...(result.body as object), instances: null });
    }
    const answer = (result.status ?? 200) === 200 ? quirkInstanceRecords(group, result.body, world.config.quirks) : result.body;
    const malformed = world.faults.malformedRecord();
    if (malformed !== 'none' && (result.status ?? 200) === 200) return send(200, malformFirstRecord(group, answer, malformed));
    send(result.status ?? 200, answer);
  } catch (err) {
    if (err instanceof SimHttpError) return send(err.status, err.body);
    throw err;
  }
}

function checkPermission(route: Route, p: Principal): void {
  if (p.kind === 'instance') {
    if (!route.instanceKey) {
      throw permissionDenied(route.category ?? 'misc', 'an instance key may only start, stop or destroy its own instance');
    }
    return;
  }
  if (route.category && !hasCategory(p, route.category)) throw permissionDenied(route.category);
}

/** A malformed %-escape in a path is the client's error, not ours. */
function safeMatch(router: Router<Route>, method: string, path: string) {
  try {
    return router.match(method, path);
  } catch {
    throw invalidRequest('Malformed path.');
  }
}

/**
 * The 429 forms: `{detail}` where a yaml documents it, destroy's `{success, error, msg}`, or the
 * rate-limit page's plain text. Never a Retry-After header, like the service.
 */
function tooFrequent(res: ServerResponse, form: 'detail' | 'success_error' | 'plain', threshold: string | null): void {
  if (form === 'plain') {
    return sendText(
      res,
      429,
      threshold === null ? 'API requests too frequent' : `API requests too frequent: endpoint threshold=${threshold}`,
    );
  }
  const text = threshold === null ? 'API requests too frequent' : `API requests too frequent endpoint threshold=${threshold}`;
  if (form === 'success_error') return sendJson(res, 429, { success: false, error: 'rate_limit_exceeded', msg: text });
  sendJson(res, 429, { detail: text });
}

function answerError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (err instanceof SimHttpError) return sendJson(res, err.status, err.body);
  sendJson(res, 500, { success: false, error: 'internal_error', msg: `error 500/0: ${err instanceof Error ? err.message : String(err)}` });
}
