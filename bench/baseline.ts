// The baseline of the berth benchmark: the obvious client loop a user writes against the service's
// API, one per run, all at once. Search, take the best offer not tried yet, create, poll that one
// instance every interval, destroy and start over on a failure or a boot timeout. Transport as the
// official CLI does it: plain HTTP requests, a 429 or 5xx retried after 0.15 s × 1.5^n, three tries
// in all, then given up. It shares nothing with berth's client (no limiter, no shared poll).
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';

export interface BaselineJob {
  /** The search body, as berth would send it for the same job spec. */
  query: Record<string, unknown>;
  image: string;
  diskGb: number;
  maxPricePerHour: number;
}

export interface BaselineOptions {
  url: string;
  apiKey: string;
  jobs: BaselineJob[];
  pollIntervalMs: number;
  bootTimeoutMs: number;
  maxAttempts: number;
  deadlineMs: number;
}

export interface BaselineRun {
  /** Index in `jobs`; instance labels are `baseline:<index>:<attempt>`. */
  index: number;
  /** Wall ms when a poll first showed the instance running; null if it never did. */
  runningAt: number | null;
  instanceId: number | null;
}

export const BASELINE_LABEL_PREFIX = 'baseline:';
const FAILED = new Set(['exited', 'unknown', 'offline']);

interface Answer {
  status: number;
  /** Untyped on purpose: the loop reads the few fields it needs, as a script would. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the baseline is the naive script berth is measured against
  body: any;
}

/** Runs every job's loop at once; resolves when each has a running instance or gave up. */
export async function runBaseline(opts: BaselineOptions): Promise<BaselineRun[]> {
  // A plain agent of its own, so that none of berth's settings apply.
  const agent = new Agent({ headersTimeout: 30_000, bodyTimeout: 30_000 });
  const headers = { authorization: `Bearer ${opts.apiKey}`, 'content-type': 'application/json' };

  async function call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<Answer> {
    let last: Answer = { status: 0, body: null };
    for (let n = 0; n < 3; n++) {
      if (n > 0) await sleep(150 * 1.5 ** (n - 1));
      try {
        const res = await request(opts.url + path, {
          method,
          headers,
          body: body === undefined ? null : JSON.stringify(body),
          dispatcher: agent,
        });
        const text = await res.body.text();
        last = { status: res.statusCode, body: safeJson(text) };
      } catch {
        last = { status: 0, body: null }; // dropped connection: retried like a 5xx
      }
      if (last.status !== 429 && last.status < 500 && last.status !== 0) return last;
    }
    return last;
  }

  async function destroy(id: number, until: number): Promise<void> {
    // A destroy that did not go through is tried again: a loop that forgets it leaves an instance billing.
    while (Date.now() < until) {
      const res = await call('DELETE', `/api/v0/instances/${id}/`);
      if (res.status === 200 || res.status === 404) return;
      await sleep(opts.pollIntervalMs);
    }
  }

  async function oneRun(index: number, job: BaselineJob): Promise<BaselineRun> {
    const deadline = Date.now() + opts.deadlineMs;
    const tried = new Set<number>();
    let attempts = 0;
    while (Date.now() < deadline && attempts < opts.maxAttempts) {
      const found = await call('POST', '/api/v0/bundles/', job.query);
      const offers: Array<{ id: number; dph_total: number }> = found.status === 200 ? (found.body?.offers ?? []) : [];
      const offer = offers.find((o) => !tried.has(o.id) && o.dph_total <= job.maxPricePerHour);
      if (!offer) {
        await sleep(opts.pollIntervalMs);
        continue;
      }
      tried.add(offer.id);
      const created = await call('PUT', `/api/v0/asks/${offer.id}/`, {
        client_id: 'me',
        image: job.image,
        disk: job.diskGb,
        label: `${BASELINE_LABEL_PREFIX}${index}:${attempts + 1}`,
        runtype: 'ssh',
      });
      if (created.status !== 200 || typeof created.body?.new_contract !== 'number') continue; // taken or failed: search again
      attempts++;
      const id: number = created.body.new_contract;
      const createdAt = Date.now();
      for (;;) {
        await sleep(opts.pollIntervalMs);
        const shown = await call('GET', `/api/v0/instances/${id}/`);
        const status: string | null | undefined = shown.status === 200 ? shown.body?.instances?.actual_status : undefined;
        if (status === 'running') return { index, runningAt: Date.now(), instanceId: id };
        if ((status && FAILED.has(status)) || Date.now() - createdAt > opts.bootTimeoutMs || Date.now() > deadline) break;
      }
      await destroy(id, deadline + 60_000);
    }
    return { index, runningAt: null, instanceId: null };
  }

  try {
    return await Promise.all(opts.jobs.map((job, i) => oneRun(i, job)));
  } finally {
    await agent.close();
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
