// A real HTTP server on a free loopback port whose answers each test scripts, recording every
// request it received (so tests can count what reached the "service").
import http, { type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RATE_GROUPS, type Config } from '../../../src/config/schema.js';

interface FakeRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: unknown;
  /** Arrival time, ms (performance.now()). */
  at: number;
}

export type FakeHandler = (req: FakeRequest, res: ServerResponse) => unknown;

export interface FakeServer {
  url: string;
  requests: FakeRequest[];
  setHandler(handler: FakeHandler): void;
  close(): Promise<void>;
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export async function startFakeServer(initial: FakeHandler = (_q, res) => json(res, 200, { success: true })): Promise<FakeServer> {
  let handler = initial;
  const requests: FakeRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        /* keep text */
      }
      const fr: FakeRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, at: performance.now() };
      requests.push(fr);
      void Promise.resolve(handler(fr, res)).catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    setHandler(h) {
      handler = h;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A client config with fast retries and generous limits; override what a test is about. */
export function testConfig(
  overrides: {
    rate?: Partial<Record<keyof Config['rate_limits'], Partial<Config['rate_limits']['search']>>> | undefined;
    retry?: Partial<Config['retry']>;
    service?: Partial<Config['service']>;
  } = {},
): Pick<Config, 'service' | 'rate_limits' | 'retry'> {
  const group = { per_s: 1000, burst: 100 };
  const groups = RATE_GROUPS;
  return {
    service: { base_url: 'http://127.0.0.1', timeout_s: 2, connect_timeout_s: 1, ...overrides.service },
    rate_limits: Object.fromEntries(groups.map((g) => [g, { ...group, ...overrides.rate?.[g] }])) as Config['rate_limits'],
    retry: { max_retry_time_s: 5, min_delay_s: 0.01, max_delay_s: 0.05, factor: 2, ...overrides.retry },
  };
}
