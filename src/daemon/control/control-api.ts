// The control API (SPEC section 5; its wire contract is src/wire/control-api.ts): loopback only,
// every route but /healthz and the proof behind the bearer control token, on the router the
// simulator uses too (src/http/router.ts). Errors are `{"error": {"kind", "message"}}`; a spec
// error also lists its issues.
//
// A request is refused before routing when
// - its Host is not the daemon's own loopback address (a web page's DNS-rebinding request names its
//   own host), or it carries an Origin other than that address (any web page): 403;
// - its target cannot be parsed: 400;
// - it has a body that is not `application/json` (a no-preflight `text/plain` POST from a page): 415.
// Then: an unknown path 404 and a known path with another method 405 (after the token check, so
// nothing but the two open routes answers without the token), a body over 1 MiB 413.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BerthError, SpecError, StoreWriteError } from '../../errors.js';
import { hasBody, isJsonContent, sendJson, sendText } from '../../http/body.js';
import { BadPathError, Router } from '../../http/router.js';
import type { Logger } from '../../logger.js';
import { controlRoutes, type ControlApiDeps } from './control-routes.js';
import { HttpProblem, type Answer, type ControlRoute } from './route-types.js';
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

export function createControlApi(deps: ControlApiDeps): Server {
  const { tokens, log } = deps;
  const router = new Router<ControlRoute>(controlRoutes(deps));

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<Answer> {
    const host = checkOrigin(req);
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      throw new HttpProblem(400, 'bad_request', 'The request target cannot be parsed.');
    }
    if (hasBody(req) && !isJsonContent(req)) {
      throw new HttpProblem(415, 'unsupported_media_type', 'A request body must be JSON with "Content-Type: application/json".');
    }
    const method = req.method ?? 'GET';
    let match;
    try {
      match = router.match(method, url.pathname);
    } catch (err) {
      if (err instanceof BadPathError) throw new HttpProblem(400, 'bad_request', err.message);
      throw err;
    }
    const open = match.kind === 'found' && match.route.auth === 'open';
    if (!open && !tokenMatches(req.headers.authorization, tokens.current())) {
      throw new HttpProblem(
        401,
        'unauthorized',
        'Missing or wrong control token: send "Authorization: Bearer <BERTH_HOME/control.token>".',
      );
    }
    if (match.kind === 'none') throw new HttpProblem(404, 'not_found', `No route ${method} ${url.pathname}.`);
    if (match.kind === 'method') {
      const allow = match.allow.join(', ');
      throw new HttpProblem(405, 'method_not_allowed', `${method} is not allowed on ${url.pathname} (allowed: ${allow}).`, {}, { allow });
    }
    return match.route.handle({ req, res, url, host, params: match.params });
  }

  return createServer((req, res) => {
    handle(req, res)
      .then((answer) => {
        if ('streamed' in answer) return;
        if ('text' in answer) sendText(res, answer.status, answer.text, answer.contentType);
        else sendJson(res, answer.status, answer.body);
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
