// A client of the daemon's control API for tests: JSON calls with the bearer token, and polling a
// run until it reaches a state.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request } from 'undici';
import type { Run as RunView } from '../../src/wire/control-api.js';

export interface ControlApi {
  api<T = unknown>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: T }>;
  waitFor(runId: string, pred: (r: RunView) => boolean, timeoutMs?: number): Promise<RunView>;
}

/** `target` is read at each call, so a restarted daemon's new address and token are picked up. */
export function controlApi(target: () => { url: string; token: string }): ControlApi {
  const c: ControlApi = {
    async api(method, path, body, headers = {}) {
      const { url, token } = target();
      const res = await request(url + path, {
        method: method as 'GET',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
        body: body === undefined ? null : JSON.stringify(body),
      });
      return { status: res.statusCode, body: (await res.body.json()) as never };
    },
    async waitFor(runId, pred, timeoutMs = 20_000) {
      const until = Date.now() + timeoutMs;
      let last: RunView | undefined;
      while (Date.now() < until) {
        last = (await c.api<RunView>('GET', `/v1/runs/${runId}`)).body;
        if (pred(last)) return last;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error(`run ${runId} did not reach the expected state; last: ${JSON.stringify(last)}`);
    },
  };
  return c;
}

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

export interface RawOptions {
  /** The bearer token; the daemon's own when left out, none when null. */
  token?: string | null;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/**
 * One request over node:http exactly as given (no JSON content type unless asked): for the
 * contract tests, which send what a hostile or careless client would and read every answer.
 */
export function rawRequest(
  daemon: { url: string; token: string },
  method: string,
  path: string,
  opts: RawOptions = {},
): Promise<RawAnswer> {
  const auth = opts.token === null ? {} : { authorization: `Bearer ${opts.token ?? daemon.token}` };
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${daemon.url}${path}`, { method, headers: { ...auth, ...opts.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}
