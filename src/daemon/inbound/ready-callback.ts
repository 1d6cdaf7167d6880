// The readiness callback listener: where an instance's onstart posts its attempt's token once the
// script has run (readiness.callback_url points here, directly or through a tunnel). It is not the
// control API and shares nothing with it: instances are remote, reach it through whatever address
// the user gave, and hold no control token, so it takes no Host or Origin check and no bearer token.
// What it takes instead is a token only this daemon can make (./ready-token.ts), good for one
// attempt of one run; with it, the run hears READY for that attempt and is running at once (the
// shared poller's lists still confirm the instance afterwards). Anything else changes nothing.
//
// One route, on any path (a tunnel may add or strip a prefix): POST with `{"token": "..."}`.
//   202 the token was good and its run was told; 410 good, but the run has ended;
//   403 not a token of this daemon; 400 no token in the body; 405 not a POST; 413 a body over 1 KB.
// A request that is slow to arrive is cut off after 10 s. The token is never logged.
import { countText } from '../../count-text.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { BodyTooLargeError, readBody } from '../../http/body.js';
import type { Logger } from '../../logger.js';
import type { ReadyTokens } from './ready-token.js';

/** A token and its JSON wrapping are well under this. */
const MAX_BODY_BYTES = 1024;
const REQUEST_TIMEOUT_MS = 10_000;

export interface ReadyCallbackDeps {
  tokens: ReadyTokens;
  /** Sends READY {n} to the run; false when the run is not live in this daemon. */
  ready(runId: string, n: number): boolean;
  log: Logger;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), connection: 'close' });
  res.end(text);
}

const problem = (kind: string, message: string) => ({ error: { kind, message } });

/** The body, or null past MAX_BODY_BYTES (answered 413). */
async function bodyWithin(req: IncomingMessage): Promise<string | null> {
  try {
    return await readBody(req, MAX_BODY_BYTES);
  } catch (err) {
    if (err instanceof BodyTooLargeError) return null;
    throw err;
  }
}

/** The token of `{"token": "..."}`, or of a plain-text body holding the token alone. */
function tokenIn(body: string): string | null {
  const text = body.trim();
  if (!text.startsWith('{')) return text || null;
  try {
    const token = (JSON.parse(text) as { token?: unknown }).token;
    return typeof token === 'string' ? token : null;
  } catch {
    return null;
  }
}

/** Refused tokens are logged at most once per this long (with a count): a flood of bad requests must not flood the log. */
const REFUSED_LOG_EVERY_MS = 10_000;

export function createReadyCallbackServer(deps: ReadyCallbackDeps): Server {
  const { tokens, log } = deps;
  let refused = 0;
  let refusedLoggedAt = -Infinity;
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST') return send(res, 405, problem('method_not_allowed', 'POST the attempt token as {"token": "..."}.'));
    const body = await bodyWithin(req);
    if (body === null) return send(res, 413, problem('too_large', `The body is larger than ${MAX_BODY_BYTES} bytes.`));
    const token = tokenIn(body);
    if (token === null) return send(res, 400, problem('bad_request', 'The body must be {"token": "..."}.'));
    const attempt = tokens.verify(token);
    if (!attempt) {
      refused++;
      if (Date.now() - refusedLoggedAt >= REFUSED_LOG_EVERY_MS) {
        log.warn(
          { from: req.socket.remoteAddress, refused },
          `${countText(refused, 'readiness callback')} with a token this daemon did not make ${refused === 1 ? 'was' : 'were'} refused`,
        );
        refused = 0;
        refusedLoggedAt = Date.now();
      }
      return send(res, 403, problem('forbidden', 'Unknown token.'));
    }
    if (!deps.ready(attempt.runId, attempt.n)) {
      return send(res, 410, problem('gone', `Run ${attempt.runId} is not live.`));
    }
    log.info({ runId: attempt.runId, attempt: attempt.n }, `attempt #${attempt.n}: the onstart called back`);
    send(res, 202, { accepted: true });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error({ err }, 'readiness callback error');
      if (!res.headersSent) send(res, 500, problem('internal', 'Internal error.'));
    });
  });
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.headersTimeout = REQUEST_TIMEOUT_MS;
  return server;
}
