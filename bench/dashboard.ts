// `npm run bench -- --only dashboard`: the web dashboard in headless Chromium against a real daemon
// with 10,000 ended runs in its store (issue #22): the runs page's first render (navigation start,
// sign-in answer included, to the first page of runs on screen), and the time from an event's
// storing to its line on an open run page, over runs that fail over once. The browser test
// (test/e2e/dashboard.test.ts) checks the same two figures with the same functions.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'puppeteer-core';
import { openStore } from '../src/store/index.js';
import { FAST_SIM, startSimulator } from '../src/sim/index.js';
import type { Run, RunEvent } from '../src/wire/control-api.js';
import { launchBrowser } from './browser.js';
import { spawnDaemon } from './measure-daemon.js';
import { tryOrder } from './offer-order.js';
import { median, quantile, type BenchSection } from './types.js';

// What the functions evaluated in the browser use of the page (bench/ compiles without the DOM library).
interface PageElement {
  textContent: string | null;
  getAttribute(name: string): string | null;
}
declare const document: {
  body: unknown;
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
};
declare const window: { seenAt: Record<string, number> };
declare const location: { hash: string };
declare const MutationObserver: new (callback: () => void) => { observe(target: unknown, options: object): void };

/** Stores `n` ended runs (failed or cancelled, one a second up to now), as a long-lived daemon would have. */
export function seedEndedRuns(home: string, n: number, spec: Record<string, unknown>): void {
  const store = openStore({ home });
  const t0 = Date.now() - n * 1000;
  try {
    store.transaction(() => {
      for (let i = 0; i < n; i++) {
        const id = `seeded-${String(i).padStart(6, '0')}`;
        store.runs.insert({
          id,
          name: `seeded-job-${i}`,
          specJson: JSON.stringify({ ...spec, name: `seeded-job-${i}` }),
          createdAt: t0 + i * 1000,
        });
        store.runs.setState(id, i % 3 === 0 ? 'failed' : 'cancelled', null, t0 + i * 1000 + 500);
      }
    });
  } finally {
    store.close();
  }
}

/** Opens a sign-in URL in a fresh browser context: ms from the navigation's start to the first row of runs on screen. */
export async function runsFirstRenderMs(browser: Browser, signInUrl: string): Promise<{ ms: number; rows: number; total: string }> {
  const ctx = await browser.createBrowserContext();
  try {
    const page = await ctx.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(signInUrl);
    await page.waitForSelector('table.runs tbody tr', { timeout: 30_000 });
    const ms = (await page.evaluate(() => performance.now())) as number;
    const rows = await page.$$eval('table.runs tbody tr', (r) => r.length);
    await page.waitForFunction(() => /\d+ runs?/.test(document.querySelector('.filters')?.textContent ?? ''), { timeout: 10_000 });
    const total = (await page.$eval('.filters', (e) => e.textContent ?? '')).replace(/.*· /, '');
    return { ms, rows, total };
  } finally {
    await ctx.close();
  }
}

export interface EventLags {
  /** For each event stored while the page was open, ms from its storing (`at`) to its line on the page. */
  lags: number[];
  /** The ids of the run's stored events that never reached the page (none, when it works). */
  missing: number[];
}

/**
 * Signs in, then submits a run (`submit`, which answers its id) and opens its page at once, and
 * waits until `done` holds of the run, then until every event stored of it is on the page (10 s at
 * most). The lags are measured by a MutationObserver's clock (the browser and the daemon share the
 * machine's); an event the page never showed is not dropped from the count but named in `missing`.
 */
export async function eventLagsMs(
  browser: Browser,
  signInUrl: string,
  submit: () => Promise<string>,
  read: (id: string) => Promise<{ run: Run; events: RunEvent[] }>,
  done: (r: Run) => boolean,
): Promise<EventLags> {
  const ctx = await browser.createBrowserContext();
  try {
    const page = await ctx.newPage();
    await page.goto(signInUrl);
    await page.waitForSelector('table.runs, .notice');
    await page.evaluate(() => {
      window.seenAt = {};
      new MutationObserver(() => {
        for (const li of document.querySelectorAll('.events li[data-id]')) window.seenAt[li.getAttribute('data-id') ?? ''] ??= Date.now();
      }).observe(document.body, { childList: true, subtree: true });
    });
    const runId = await submit();
    await page.evaluate((id: string) => (location.hash = `#/runs/${id}`), runId);
    let last: { run: Run; events: RunEvent[] } | undefined;
    for (const end = Date.now() + 60_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
      last = await read(runId);
      if (done(last.run)) break;
    }
    if (!last || !done(last.run)) throw new Error(`run ${runId} did not reach the awaited state`);
    const ids = last.events.map((e) => e.id);
    // The last events' way to the page; one that never comes is reported, not waited for longer.
    await page
      .waitForFunction((want: number[]) => want.every((id) => window.seenAt[id] !== undefined), { timeout: 10_000, polling: 50 }, ids)
      .catch(() => undefined);
    const seenAt = (await page.evaluate(() => window.seenAt)) as Record<string, number>;
    // The events stored before the page read the run came with that read, not from the stream.
    const opened = Math.min(...Object.values(seenAt));
    return {
      lags: last.events.filter((e) => Date.parse(e.at) > opened && seenAt[e.id] !== undefined).map((e) => seenAt[e.id]! - Date.parse(e.at)),
      missing: ids.filter((id) => seenAt[id] === undefined),
    };
  } finally {
    await ctx.close();
  }
}

function benchSpec(name: string): Record<string, unknown> {
  return {
    name,
    image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
    disk_gb: 20,
    search: { filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
    max_price_per_hour: 5,
    max_attempts: 8,
    boot_timeout_s: 5,
    deadline_s: 60,
    relax: [],
  };
}

export async function runDashboardBench(opts: { quick: boolean }): Promise<BenchSection> {
  const storeRuns = opts.quick ? 2000 : 10_000;
  const loads = 5;
  const runs = opts.quick ? 3 : 10;
  const sim = await startSimulator({ seed: 22, config: FAST_SIM });
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-dash-'));
  const { browser, close } = await launchBrowser();
  let daemon: Awaited<ReturnType<typeof spawnDaemon>> | undefined;
  try {
    seedEndedRuns(home, storeRuns, benchSpec('seeded'));
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, { daemon: { listen: '127.0.0.1:0' }, polling: { interval_s: 0.1 } });
    const d = daemon;
    const signIn = async () => (await d.api<{ url: string }>('POST', '/v1/ui/codes')).body.url;

    const renders: number[] = [];
    for (let i = 0; i < loads; i++) {
      const r = await runsFirstRenderMs(browser, await signIn());
      if (r.rows !== 50) throw new Error(`the runs page showed ${r.rows} rows, not 50`);
      renders.push(r.ms);
    }

    const lags: number[] = [];
    for (let i = 0; i < runs; i++) {
      const spec = benchSpec(`latency-${i}`);
      const [first] = await tryOrder(sim, spec);
      sim.setOfferProfile(first!.id, 'exited');
      let runId = '';
      const submit = async () => (runId = (await d.api<Run>('POST', '/v1/runs', spec)).body.id);
      const read = async (id: string) => ({
        run: (await d.api<Run>('GET', `/v1/runs/${id}`)).body,
        events: (await d.api<RunEvent[]>('GET', `/v1/runs/${id}/events`)).body,
      });
      const got = await eventLagsMs(browser, await signIn(), submit, read, (r) => r.state === 'running');
      if (got.missing.length > 0) throw new Error(`events ${got.missing.join(', ')} of run ${runId} never reached its page`);
      lags.push(...got.lags);
      await d.api('POST', `/v1/runs/${runId}/cancel`);
    }
    const p99 = quantile(lags, 0.99);
    return {
      title: `Web dashboard (headless Chromium, ${storeRuns.toLocaleString('en')} runs in the store${opts.quick ? ', quick' : ''})`,
      rows: [
        {
          metric: `runs page first render, ${storeRuns.toLocaleString('en')} runs in the store, median / max of ${loads}`,
          value: `${median(renders).toFixed(0)} ms / ${Math.max(...renders).toFixed(0)} ms`,
          target: '< 1 s',
          met: Math.max(...renders) < 1000,
          note: 'a fresh browser context each time: from the navigation to the sign-in URL (its answer included) to the first page of 50 runs on screen (performance.now())',
        },
        {
          metric: `stored event → its line on an open run page, median / p99 (${lags.length} events, ${runs} runs failing over once)`,
          value: `${median(lags).toFixed(0)} ms / ${p99.toFixed(0)} ms`,
          target: 'p99 ≤ 250 ms',
          met: p99 <= 250,
          note: "the event's stored time (its `at`) to the moment a MutationObserver in the page saw its line; the page follows GET /v1/events/stream?run=",
        },
      ],
    };
  } finally {
    await close();
    await daemon?.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}
