// A client of the daemon's control API for tests: JSON calls with the bearer token, and polling a
// run until it reaches a state.
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
        body: body === undefined ? undefined : JSON.stringify(body),
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
