// The wire: one keep-alive undici Agent and one `send`. No retries here (undici's retry
// interceptor is not installed; the one retry loop lives in service-call.ts), explicit
// timeouts (undici's 300 s defaults are far too long for a control plane), and the API key only
// ever in the Authorization header, never in a URL.
//
// Requests are shaped as the official client sends them (vast-cli `vastai/api/client.py`, which
// uses `requests` with `json=`): a GET carries no body and no content type; POST, PUT and DELETE
// carry a JSON body, `{}` when the call has nothing to say, with `content-type: application/json`.
// A content type on a bodiless GET, or a DELETE without the `{}` the CLI sends, is a request shape
// the service has never been seen to answer (issue #30, case 5).
import { Agent } from 'undici';

export interface HttpOptions {
  baseUrl: string;
  apiKey: string;
  /** TCP connect timeout, ms. */
  connectTimeoutMs: number;
  /** Headers timeout and body (idle) timeout, ms. */
  timeoutMs: number;
}

export interface HttpResponse {
  status: number;
  /** Parsed JSON when the body is JSON, the raw text otherwise ('' when empty). */
  body: unknown;
}

export interface Http {
  send(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<HttpResponse>;
  close(): Promise<void>;
}

function parseBody(text: string, contentType: string | undefined): unknown {
  const looksJson = contentType?.includes('json') || /^\s*[[{"]/.test(text);
  if (!looksJson || text.length === 0) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // A JSON content type with a broken body: give the text back and let the caller judge it.
    return text;
  }
}

/** The body text as the official client sends it: none on GET/HEAD, `{}` when a write has none. */
function requestBody(method: string, body: unknown): string | null {
  if (method === 'GET' || method === 'HEAD') return null;
  return JSON.stringify(body ?? {});
}

export function createHttp(options: HttpOptions): Http {
  const base = new URL(options.baseUrl);
  const origin = base.origin;
  const prefix = base.pathname.replace(/\/+$/, '');
  const agent = new Agent({
    connect: { timeout: options.connectTimeoutMs },
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    keepAliveTimeout: 10_000,
    keepAliveMaxTimeout: 60_000,
  });
  const bare = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json' };
  const withBody = { ...bare, 'content-type': 'application/json' };

  return {
    async send(method, path, body, signal) {
      const payload = requestBody(method, body);
      const res = await agent.request({
        origin,
        path: prefix + path,
        method: method as 'GET',
        headers: payload === null ? bare : withBody,
        body: payload,
        signal: signal ?? null,
      });
      const text = await res.body.text();
      const ct = res.headers['content-type'];
      return { status: res.statusCode, body: parseBody(text, Array.isArray(ct) ? ct[0] : ct) };
    },
    async close() {
      await agent.close();
    },
  };
}
