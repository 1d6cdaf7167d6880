// The control API (docs/control-api.md; its wire contract is src/wire/control-api.ts): loopback only,
// every route but /healthz and the proof behind the bearer control token, on the router the
// simulator uses too (src/http/router.ts). Errors are `{"error": {"kind", "message"}}`; a spec
// error also lists its issues.
//
// A request is refused before routing when
// - its Host is not the daemon's own loopback address (a web page's DNS-rebinding request names its
//   own host), or it carries an Origin other than that address (any web page): 403;
// - its target cannot be parsed: 400;
// - it has a body that is not `application/json` (a no-preflight `text/plain` POST from a page): 415;
//   a route that takes raw bytes (`rawBody`: a task's packed workdir) takes `application/octet-stream`
//   instead, a type a page cannot send without a preflight either.
// Then the caller is authenticated: by the bearer control token (the CLI, scripts), or by a
// dashboard session cookie (./dashboard/). A request with an Authorization header is judged by it
// alone. With a session, a route that takes the token only refuses (403), and every request must
// carry the session's CSRF token in X-CSRF-Token (the event stream, which EventSource opens without
// headers, may carry it as `?csrf=`): 401 for a read without it, 403 for a change; a change must
// also come with an Origin of this daemon's own. The cookie alone proves nothing: SameSite sees
// every port of 127.0.0.1 as one site and cookies are not kept apart by port, so a page on another
// port sends it (an <img> to a paid GET spent the account's rate budget) and a server on another
// port the browser is sent to receives it. The CSRF token is what another port cannot have: it
// reaches the page once, in the body of the sign-in answer (never in a URL), and lives in the page
// origin's own storage; no route hands it to a request that does not carry it already.
//
// Every answer is `Cache-Control: no-store` (the CSRF token and run data never land in a disk
// cache; the dashboard's assets say otherwise) and `X-Content-Type-Options: nosniff`.
// Then: an unknown path 404 and a known path with another method 405 (after the authentication,
// so nothing but the open routes answers a stranger), a body over 1 MiB 413.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BerthError, SpecError, StoreWriteError } from '../../errors.js';
import { hasBody, isJsonContent, sendJson, sendText } from '../../http/body.js';
import { BadPathError, Router } from '../../http/router.js';
import type { Logger } from '../../logger.js';
import { RAW_BODY_TYPE } from './blob-route.js';
import { controlRoutes, type ControlApiDeps } from './control-routes.js';
import { HttpProblem, type Answer, type ControlRoute } from './route-types.js';
import { cookieName, readCookies } from './dashboard/cookies.js';
import type { DashboardSessions, SignIn } from './dashboard/sessions.js';
import { isUsableToken } from '../../config/control-token.js';
import { IdempotencyConflictError } from '../runs/submission.js';

export type { ControlApiDeps } from './control-routes.js';

function tokenMatches(header: string | undefined, token: string): boolean {
  if (!isUsableToken(token)) return false; // never "no token means no check"
  const given = Buffer.from(header?.startsWith('Bearer ') ? header.slice(7) : '');
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** The Host values that name this daemon: the address and port the request arrived on, or localhost. */
function ownHosts(req: IncomingMessage): string[] {
  const { localAddress, localPort } = req.socket;
  if (!localAddress || !localPort) return [];
  const ip = localAddress.includes(':') ? `[${localAddress}]` : localAddress;
  return [`${ip}:${localPort}`, `localhost:${localPort}`];
}

function checkOrigin(req: IncomingMessage): string {
  const hosts = ownHosts(req);
  const host = req.headers.host?.toLowerCase();
  if (!host || !hosts.includes(host)) {
    throw new HttpProblem(
      403,
      'forbidden',
      `Host "${host ?? ''}" is not this daemon's address; call it as http://${hosts[0] ?? '127.0.0.1'}.`,
    );
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !hosts.some((h) => origin.toLowerCase() === `http://${h}`)) {
    throw new HttpProblem(403, 'forbidden', 'Requests from web pages are refused.');
  }
  return host;
}

/** The event stream: EventSource sends no header, so its CSRF token may come as `?csrf=`. */
const STREAM_PATH = '/v1/events/stream';

const UNAUTHORIZED = 'Missing or wrong control token: send "Authorization: Bearer <BERTH_HOME/control.token>".';

/**
 * Who sent the request: the token holder ('token') or a dashboard session. Throws 401/403 for
 * anyone else, and for a session doing what only the token may or changing state without its
 * CSRF token.
 */
function authenticate(
  req: IncomingMessage,
  url: URL,
  route: ControlRoute | undefined,
  tokens: ControlApiDeps['tokens'],
  sessions: DashboardSessions,
): 'token' | SignIn {
  if (req.headers.authorization !== undefined) {
    if (tokenMatches(req.headers.authorization, tokens.current())) return 'token';
    throw new HttpProblem(401, 'unauthorized', UNAUTHORIZED);
  }
  const header = req.headers['x-csrf-token'];
  const csrf = typeof header === 'string' ? header : url.pathname === STREAM_PATH ? (url.searchParams.get('csrf') ?? undefined) : undefined;
  // Every cookie of the session's name is tried, not the first one sent (issue #38 item 6): one that
  // another local page tossed in is no session and locks no one out. Of several live ones, the one
  // the CSRF token belongs to.
  const sent = readCookies(req, cookieName(req.socket.localPort ?? 0));
  const live = sent.filter((id) => sessions.peek(id) !== undefined);
  const sessionId = live.find((id) => sessions.csrfMatches(sessions.peek(id)!, csrf)) ?? live[0];
  const session = sessionId === undefined ? undefined : sessions.use(sessionId);
  if (!session) {
    const why = sent.length === 0 ? UNAUTHORIZED : 'The dashboard session has ended: run `berth ui` to sign in again.';
    throw new HttpProblem(401, 'unauthorized', why);
  }
  if (route?.auth === 'token') throw new HttpProblem(403, 'forbidden', 'This route takes the control token, not a dashboard session.');
  const csrfOk = sessions.csrfMatches(session, csrf);
  if (req.method === 'GET') {
    if (!csrfOk)
      throw new HttpProblem(
        401,
        'unauthorized',
        'A dashboard read must come from the page, with its X-CSRF-Token: run `berth ui` to sign in.',
      );
  } else if (req.headers.origin === undefined || !csrfOk) {
    // checkOrigin has refused a foreign Origin; a state change must also say it has one.
    throw new HttpProblem(403, 'forbidden', 'A dashboard request that changes state must come from the page, with its X-CSRF-Token.');
  }
  return { sessionId: sessionId!, session };
}

function isRawContent(req: IncomingMessage): boolean {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === RAW_BODY_TYPE;
}

export function createControlApi(deps: ControlApiDeps): Server {
  const { tokens, log, sessions } = deps;
  const router = new Router<ControlRoute>(controlRoutes(deps));

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<Answer> {
    const host = checkOrigin(req);
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      throw new HttpProblem(400, 'bad_request', 'The request target cannot be parsed.');
    }
    const method = req.method ?? 'GET';
    let match;
    try {
      match = router.match(method, url.pathname);
    } catch (err) {
      if (err instanceof BadPathError) throw new HttpProblem(400, 'bad_request', err.message);
      throw err;
    }
    const route = match.kind === 'found' ? match.route : undefined;
    // A raw body only where the route takes one, and only as application/octet-stream: a type a
    // page cannot send without a preflight, as JSON.
    if (route?.rawBody ? hasBody(req) && !isRawContent(req) : hasBody(req) && !isJsonContent(req)) {
      const wanted = route?.rawBody ? RAW_BODY_TYPE : 'application/json';
      const what = route?.rawBody ? 'A blob must be sent' : 'A request body must be JSON';
      throw new HttpProblem(415, 'unsupported_media_type', `${what} with "Content-Type: ${wanted}".`);
    }
    const caller = route?.auth === 'open' ? undefined : authenticate(req, url, route, tokens, sessions);
    if (match.kind === 'none') throw new HttpProblem(404, 'not_found', `No route ${method} ${url.pathname}.`);
    if (match.kind === 'method') {
      const allow = match.allow.join(', ');
      throw new HttpProblem(405, 'method_not_allowed', `${method} is not allowed on ${url.pathname} (allowed: ${allow}).`, {}, { allow });
    }
    const session = caller === undefined || caller === 'token' ? undefined : caller;
    return match.route.handle({ req, res, url, host, params: match.params, ...(session ? { session } : {}) });
  }

  return createServer((req, res) => {
    // Defaults of every answer (an answer's own headers win: the dashboard's assets may be cached).
    res.setHeader('cache-control', 'no-store');
    res.setHeader('x-content-type-options', 'nosniff');
    handle(req, res)
      .then((answer) => {
        if ('streamed' in answer) return;
        if ('text' in answer) sendText(res, answer.status, answer.text, answer.contentType, answer.headers);
        else sendJson(res, answer.status, answer.body, answer.headers);
      })
      .catch((err: unknown) => (res.headersSent ? res.destroy() : answerError(res, err, log)));
  });
}

function answerError(res: ServerResponse, err: unknown, log: Logger): void {
  const problem = toProblem(err, log);
  sendJson(res, problem.status, { error: { kind: problem.kind, message: problem.message, ...problem.extra } }, problem.headers);
}

/** Every failure in the envelope's words; only a bug is logged as an error. */
function toProblem(err: unknown, log: Logger): HttpProblem {
  if (err instanceof HttpProblem) return err;
  if (err instanceof SpecError) return new HttpProblem(400, 'spec', err.message, { issues: err.issues });
  if (err instanceof IdempotencyConflictError) return new HttpProblem(409, 'idempotency_conflict', err.message, { run_id: err.runId });
  if (err instanceof StoreWriteError) {
    log.warn({ code: err.sqliteCode }, 'a request could not be stored: the store cannot be written now');
    return new HttpProblem(503, 'store_unavailable', err.message);
  }
  if (err instanceof BerthError && err.code === 'daemon_stopping') return new HttpProblem(503, 'daemon_stopping', err.message);
  log.error({ err }, 'control API error');
  return new HttpProblem(500, 'internal', 'Internal error; see the daemon log.');
}

export async function listen(server: Server, hostPort: string): Promise<string> {
  const i = hostPort.lastIndexOf(':');
  const host = hostPort.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(hostPort.slice(i + 1));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const shownHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `http://${shownHost}:${addr.port}`;
}
