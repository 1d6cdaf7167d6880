// Makes the screenshots of the web dashboard in docs/dashboard/ (each page at 1280 and 390 px
// wide): a simulator and a real daemon with a few runs that tell the pages' stories (one failing
// over twice before it runs, one running, one cancelled, one failed), signed in the way `berth ui`
// does, shot in headless Chromium from @sparticuz/chromium.
//
//   npm run build && node dist/bench/dashboard-screenshots.js
// First, for its side effect: a temp dir of the script's own (./private-tmp.ts).
import './private-tmp.js';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import { packagePath } from '../src/package-path.js';
import { startSimulator } from '../src/sim/index.js';
import type { Run } from '../src/wire/control-api.js';
import { launchBrowser } from './browser.js';
import { spawnDaemon, type DaemonHandle } from './measure-daemon.js';
import { tryOrder } from './offer-order.js';

const OUT = packagePath('docs', 'dashboard');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function spec(name: string, changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
    disk_gb: 40,
    env: { WANDB_PROJECT: 'demo' },
    search: {
      filters: { num_gpus: { eq: 1 }, gpu_name: { in: ['RTX 4090', 'RTX 3090', 'A100 PCIE'] } },
      order: [['dph_total', 'asc']],
      limit: 16,
    },
    max_price_per_hour: 2,
    max_attempts: 6,
    boot_timeout_s: 5,
    deadline_s: 120,
    relax: [],
    ...changes,
  };
}

async function waitFor(d: DaemonHandle, id: string, states: string[]): Promise<Run> {
  for (const end = Date.now() + 60_000; Date.now() < end; await sleep(100)) {
    const run = (await d.api<Run>('GET', `/v1/runs/${id}`)).body;
    if (states.includes(run.state)) return run;
  }
  throw new Error(`run ${id} did not reach ${states.join(' or ')}`);
}

async function shoot(page: Page, name: string, ready: string): Promise<void> {
  for (const width of [1280, 390]) {
    await page.setViewport({ width, height: width === 1280 ? 900 : 844 });
    await page.waitForSelector(ready, { timeout: 20_000 });
    await sleep(300);
    await page.screenshot({ path: join(OUT, `${name}-${width}.png`) as `${string}.png`, fullPage: true });
  }
}

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const sim = await startSimulator({
    seed: 11,
    config: {
      admin: true,
      // Real time, short boots: the service's charges are then for the same seconds as berth's figures.
      time_scale: 1,
      tick_ms: 50,
      lifecycle: { provision_s: 1, boot_s: { min: 2, max: 4 }, fail_after_s: 2, lost_after_s: { min: 100, max: 200 } },
      rate_limits: { enabled: false },
      ssh_listeners: { enabled: true },
    },
  });
  const home = mkdtempSync(join(tmpdir(), 'berth-shots-'));
  let daemon: DaemonHandle | undefined;
  const { browser, close } = await launchBrowser();
  try {
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, {
      daemon: { listen: '127.0.0.1:0' },
      polling: { interval_s: 0.2 },
      budget: { max_usd_per_hour: 4, max_usd_per_day: 40 },
    });
    const d = daemon;
    const story = spec('train-llama-7b');
    const order = await tryOrder(sim, story);
    sim.setOfferProfile(order[0]!.id, 'exited');
    sim.setOfferProfile(order[1]!.id, 'stuck_loading');
    const submit = async (s: Record<string, unknown>) => (await d.api<Run>('POST', '/v1/runs', s)).body;
    const main = await submit(story);
    await sleep(300);
    const sweep = await submit(
      spec('sweep-lr-3e-4', { search: { filters: { num_gpus: { eq: 1 } }, order: [['dph_total', 'asc']], limit: 16 } }),
    );
    const nightly = await submit(
      spec('eval-nightly', {
        search: { filters: { num_gpus: { eq: 1 } }, order: [['dph_total', 'desc']], limit: 16 },
        max_price_per_hour: 3,
      }),
    );
    const cheap = await submit(spec('too-cheap', { max_price_per_hour: 0.001 }));
    await waitFor(d, nightly.id, ['running']);
    await sleep(1500);
    await d.api('POST', `/v1/runs/${nightly.id}/cancel`);
    await Promise.all([waitFor(d, main.id, ['running']), waitFor(d, sweep.id, ['running']), waitFor(d, cheap.id, ['failed'])]);
    await waitFor(d, nightly.id, ['cancelled']);
    await sleep(5000); // some spend to show

    const page = await browser.newPage();
    await page.emulateTimezone('Europe/Paris');
    const { url } = (await d.api<{ url: string }>('POST', '/v1/ui/codes')).body;
    await page.goto(url);
    await shoot(page, 'runs', 'table.runs tbody tr');
    await page.goto(`${d.url}/#/runs/${main.id}`);
    await page.waitForSelector('.attempt[data-attempt="3"]');
    await page.click('#output + p + button, section[aria-labelledby="output"] button');
    await page
      .waitForSelector('section[aria-labelledby="output"] pre, section[aria-labelledby="output"] .error', { timeout: 20_000 })
      .catch(() => undefined);
    await shoot(page, 'run', '.attempt[data-attempt="3"]');
    await page.goto(`${d.url}/#/money`);
    await page.waitForSelector('section[aria-labelledby="service"] button');
    await page.click('section[aria-labelledby="service"] button');
    await shoot(page, 'money', 'section[aria-labelledby="service"] table');
    await page.goto(`${d.url}/#/account`);
    await page.waitForSelector('#doctor ~ p + button, section[aria-labelledby="doctor"] button');
    await page.click('section[aria-labelledby="doctor"] button');
    await page.waitForSelector('.checks li', { timeout: 30_000 });
    await shoot(page, 'account', '.checks li');
    await page.goto(`${d.url}/#/submit`);
    await page.waitForSelector('textarea#spec');
    await page.$eval(
      'textarea#spec',
      (el, t) => {
        const area = el as unknown as { value: string; dispatchEvent(e: unknown): void };
        area.value = t;
        area.dispatchEvent(
          new (globalThis as unknown as { Event: new (t: string, o: object) => unknown }).Event('input', { bubbles: true }),
        );
      },
      JSON.stringify({ ...spec('new-job'), disk_gb: 'forty', max_attempts: 0, colour: 'blue' }, null, 2),
    );
    await shoot(page, 'submit', '.issues li');
    for (const r of [main, sweep]) await d.api('POST', `/v1/runs/${r.id}/cancel`);
    await Promise.all([waitFor(d, main.id, ['cancelled']), waitFor(d, sweep.id, ['cancelled'])]);
    console.log(`screenshots written to ${OUT}`);
  } finally {
    await close();
    await daemon?.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}

await main();
