// Shared helpers for the simulator suite: start a simulator in-process and call it over HTTP.
import { startSimulator, type RunningSimulator, type SimulatorOptions } from '../../../src/sim/index.js';

export interface Reply<T = any> {
  status: number;
  body: T;
  text: string;
}

/**
 * A simulator with rate limits off unless the test asks for them, fast clock, admin on, and the
 * old v0 list answering (its default, 410, has its own test).
 */
export function startTestSim(options: SimulatorOptions = {}): Promise<RunningSimulator> {
  return startSimulator({
    timeScale: 1000,
    ...options,
    config: { admin: true, rate_limits: { enabled: false }, v0_list: 'answers', ...options.config },
  });
}

export async function call<T = any>(
  sim: { url: string; apiKey: string },
  method: string,
  path: string,
  body?: unknown,
  key: string | null = sim.apiKey,
): Promise<Reply<T>> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: {
      'content-type': 'application/json',
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
    },
    body: body === undefined ? null : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // plain-text answers stay text
  }
  return { status: res.status, body: (isInstanceRead(method, path) ? stripInstanceStrings(parsed) : parsed) as T, text };
}

/** An instance list (v0, v1) or show: the answers whose records come padded by default. */
function isInstanceRead(method: string, path: string): boolean {
  return method === 'GET' && /^\/api\/v[01]\/instances\/(\d+\/?)?(\?|$)/.test(path);
}

/** Every string trimmed, at any depth: vast-cli's `_strip_strings` (`vastai/api/instances.py`). */
function strip(value: unknown): unknown {
  if (typeof value === 'string') return value.trim();
  if (Array.isArray(value)) return value.map(strip);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, strip(v)]));
  return value;
}

/**
 * The records of an instance answer read as the official CLI reads them: the simulator pads every
 * string of them by default (`quirks.padded_strings`), and the CLI strips them all. `text` keeps
 * the answer as sent.
 */
function stripInstanceStrings(body: unknown): unknown {
  if (body === null || typeof body !== 'object' || !('instances' in body)) return body;
  return { ...body, instances: strip((body as { instances: unknown }).instances) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `check` returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(check: () => T | undefined | Promise<T | undefined>, timeoutMs = 3000, what = 'condition'): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Creates an instance on the best offer matching `filters`; returns ids. */
export async function rent(
  sim: RunningSimulator,
  body: Record<string, unknown> = { image: 'pytorch/pytorch:latest', disk: 20, label: 'test' },
  filters: Record<string, unknown> = {},
): Promise<{ offerId: number; instanceId: number; instanceKey: string }> {
  const search = await call(sim, 'POST', '/api/v0/bundles/', { limit: 1, ...filters });
  if (search.status !== 200) throw new Error(`search answered ${search.status}: ${search.text}`);
  const offerId = search.body.offers[0].id as number;
  const created = await call(sim, 'PUT', `/api/v0/asks/${offerId}/`, body);
  if (created.status !== 200) throw new Error(`create answered ${created.status}: ${created.text}`);
  return { offerId, instanceId: created.body.new_contract, instanceKey: created.body.instance_api_key };
}

export async function statusOf(sim: RunningSimulator, id: number): Promise<string | null | undefined> {
  const r = await call(sim, 'GET', `/api/v0/instances/${id}/`);
  return r.body.instances?.actual_status;
}
