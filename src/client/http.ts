// The wire: one keep-alive undici Agent and one `send`. No retries here (undici's retry
// interceptor is not installed; the one retry loop lives in marketplace-client.ts), explicit
// timeouts (undici's 300 s defaults are far too long for a control plane), and the API key only
// ever in the Authorization header, never in a URL.
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
  const headers = {
    authorization: `Bearer ${options.apiKey}`,
    accept: 'application/json',
    'content-type': 'application/json',
  };

  return {
    async send(method, path, body, signal) {
      const res = await agent.request({
        origin,
        path: prefix + path,
        method: method as 'GET',
        headers,
        body: body === undefined ? null : JSON.stringify(body),
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
