// The dashboard as a new user meets it (issue #32), in a real headless Chromium against a real
// daemon process and the simulator: the newest facts show first (the event log newest first, log
// boxes following their end), a page notices that the daemon is gone (it says so, marks its
// figures stale, turns its actions off) and notices it back by itself, a run that never rented
// says so instead of offering its log, the Submit page starts empty and from an example, and at
// 390 px the nav is one line and the Account page's rate table fits the screen.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../../bench/browser.js';
import { freePort } from '../../bench/free-port.js';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import type { Run, RunEvent } from '../../src/wire/control-api.js';
import { isEndState } from '../../src/wire/run-states.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { FAST_CONFIG, FAST_SIM, jobSpec, offersInTryOrder } from '../helpers/world.js';

// The page's globals, in the functions evaluated in the browser (the test itself compiles without the DOM library).
declare const document: any, window: any, getComputedStyle: any;

let sim: RunningSimulator;
let daemon: DaemonProcess;
let home: string;
let port: number;
let tb: TestBrowser;
let page: Page;

const daemonSetup = () => ({
  home,
  simUrl: sim.url,
  apiKey: sim.apiKey,
  config: { ...FAST_CONFIG, daemon: { listen: `127.0.0.1:${port}` } },
});

beforeAll(async () => {
  // The simulator runs each onstart as a local `sh`, so that a task prints a long log.
  sim = await startSimulator({
    seed: 32,
    config: { ...FAST_SIM, onstart_exec: { enabled: true, timeout_s: 30 }, logs: { upload_delay_s: 0 } },
  });
  home = mkdtempSync(join(tmpdir(), 'berth-dash32-'));
  port = await freePort();
  [daemon, tb] = await Promise.all([spawnDaemon(daemonSetup()), launchBrowser()]);
  page = await tb.browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
}, 60_000);

afterAll(async () => {
  await tb?.close();
  if (daemon && daemon.proc.exitCode === null) await daemon.stop();
  await sim?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

async function signIn(p: Page): Promise<void> {
  const r = await berth(['ui', '--no-open'], userEnv(home));
  expect(r.code, r.stderr).toBe(0);
  await p.goto(r.stdout.trim());
  await p.waitForFunction(() => document.querySelector('h1')?.textContent?.includes('Runs'), { timeout: 15_000 });
}

async function submitRun(spec: Record<string, unknown>): Promise<string> {
  const res = await daemon.api<Run>('POST', '/v1/runs', spec);
  expect(res.status).toBe(201);
  return res.body.id;
}

async function waitForRun(id: string, done: (r: Run) => boolean, timeoutMs = 20_000): Promise<Run> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = (await daemon.api<Run>('GET', `/v1/runs/${id}`)).body;
    if (done(r)) return r;
    if (Date.now() > deadline) throw new Error(`run ${id} is still ${r.state}: ${JSON.stringify(r.attempts)} ${JSON.stringify(r.error)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('the dashboard in the first hour', () => {
  let runningId: string;

  it('shows the newest events first and log boxes at their end, where the error or the result is', async () => {
    await signIn(page);
    const lines = 400;
    const taskId = await submitRun(
      jobSpec({
        name: 'long-log',
        run: `i=0; while [ $i -lt ${lines} ]; do i=$((i+1)); echo "line $i of ${lines}"; done`,
        max_runtime_s: 600,
      }),
    );
    const task = await waitForRun(taskId, (r) => isEndState(r.state));
    expect(task.state).toBe('succeeded');

    await page.goto(`${daemon.url}/#/runs/${taskId}`);
    await page.waitForSelector('.events li');
    // Newest first: the first line of the log is the run's last event.
    const events = (await daemon.api<RunEvent[]>('GET', `/v1/runs/${taskId}/events`)).body;
    const shownFirst = await page.$eval('.events li', (li: any) => Number(li.getAttribute('data-id')));
    expect(shownFirst).toBe(Math.max(...events.map((e) => e.id)));

    // The ended attempt's kept log: its box is scrolled to its end, which shows the task's last line.
    const box = await page.waitForSelector('#attempt-logs ~ details pre.log, section[aria-labelledby="attempt-logs"] pre.log');
    const kept = await box!.evaluate((el: any) => ({ top: el.scrollTop, height: el.clientHeight, full: el.scrollHeight }));
    expect(kept.full).toBeGreaterThan(kept.height); // long enough to scroll at all
    expect(kept.top + kept.height).toBeGreaterThanOrEqual(kept.full - 4);

    // The container output, on demand: the same, its last line in view.
    await page.click('section[aria-labelledby="output"] button');
    const out = await page.waitForSelector('section[aria-labelledby="output"] pre.log');
    await page.waitForFunction((el: any, last: string) => el.textContent.includes(last), {}, out, `line ${lines} of ${lines}`);
    const shown = await out!.evaluate((el: any) => ({ top: el.scrollTop, height: el.clientHeight, full: el.scrollHeight }));
    expect(shown.full).toBeGreaterThan(shown.height);
    expect(shown.top + shown.height).toBeGreaterThanOrEqual(shown.full - 4);
  }, 90_000);

  it('says a run that never rented has no log, bills nothing, and shows its reason without backticks', async () => {
    const id = await submitRun(jobSpec({ name: 'too-cheap', max_price_per_hour: 0.001 }));
    await waitForRun(id, (r) => isEndState(r.state));
    await page.goto(`${daemon.url}/#/runs/${id}`);
    await page.waitForSelector('[data-testid="no-log"]');
    expect(await page.$eval('[data-testid="no-log"]', (el: any) => el.textContent)).toContain('ended before it rented an instance');
    expect(await page.$('section[aria-labelledby="output"] button')).toBeNull();
    expect(await page.$eval('[data-testid="run-billed-now"]', (el: any) => el.textContent)).toBe('nothing');
    const text = await page.$eval('main', (el: any) => el.textContent as string);
    expect(text).toContain('above max_price_per_hour');
    expect(text).not.toContain('`');
  });

  it('notices that the daemon is gone: says so, marks the figures stale, turns cancel off; and notices it back', async () => {
    const spec = jobSpec({ name: 'gone-daemon' });
    const [first] = await offersInTryOrder({ sim }, spec);
    sim.setOfferProfile(first!.id, 'exited');
    runningId = await submitRun(spec);
    await waitForRun(runningId, (r) => r.state === 'running');
    await page.goto(`${daemon.url}/#/runs/${runningId}`);
    await page.waitForFunction(() => document.querySelector('h1 .badge')?.textContent === 'running', { timeout: 15_000 });
    const cancel = () => page.$eval('.actions button.danger', (b: any) => b.disabled as boolean);
    expect(await cancel()).toBe(false);
    await page.evaluate(() => (window.notReloaded = true));

    expect(await daemon.stop()).toBe(0);
    const banner = await page.waitForSelector('[data-testid="daemon-gone"]', { timeout: 15_000 });
    expect(await banner!.evaluate((el: any) => el.textContent)).toContain('The daemon does not answer');
    expect(await page.$eval('main', (el: any) => el.classList.contains('stale'))).toBe(true);
    expect(await cancel()).toBe(true);
    expect(await page.$eval('[data-testid="run-spend"]', (el: any) => getComputedStyle(el, '::after').content)).toContain('stale');

    // Back on the same address: the page sees it without a reload. The restart ended the session
    // (sessions live in the daemon's memory), and the page says so instead of showing stale figures.
    daemon = await spawnDaemon(daemonSetup());
    await page.waitForFunction(() => document.querySelector('[data-testid="daemon-gone"]') === null, { timeout: 15_000 });
    await page.waitForFunction(() => document.querySelector('h1')?.textContent?.includes('Not signed in'), { timeout: 15_000 });
    expect(await page.evaluate(() => window.notReloaded)).toBe(true);

    await signIn(page);
    await page.goto(`${daemon.url}/#/runs/${runningId}`);
    await page.waitForFunction(() => document.querySelector('h1 .badge')?.textContent === 'running', { timeout: 15_000 });
    expect(await cancel()).toBe(false);
  });

  it('marks a run this berth cannot read as kept, on the list and on its page, with the version it needs (#38)', async () => {
    const id = await submitRun(jobSpec({ name: 'later-berth' }));
    await waitForRun(id, (r) => r.state === 'running');
    expect(await daemon.stop()).toBe(0);
    // As a later berth would have stored it: a run machine version this build does not know.
    const db = new Database(join(home, 'berth.db'));
    db.prepare('UPDATE runs SET machine_version = 99 WHERE id = ?').run(id);
    db.close();
    daemon = await spawnDaemon(daemonSetup());
    const kept = await waitForRun(id, (r) => r.unreadable !== null);
    expect(kept.state).toBe('running');

    await signIn(page);
    const row = await page.waitForFunction(
      (name: string) =>
        [...document.querySelectorAll('tbody tr')].find((tr: any) => tr.textContent.includes(name))?.querySelector('.badge.tone-warn'),
      { timeout: 15_000 },
      'later-berth',
    );
    expect(await row.evaluate((el: any) => [el.textContent, el.title])).toEqual([
      'kept',
      'this berth cannot drive it: it needs a berth that reads run machine version 99',
    ]);
    await page.goto(`${daemon.url}/#/runs/${id}`);
    const note = await page.waitForSelector('[data-testid="run-kept"]', { timeout: 15_000 });
    expect(await note!.evaluate((el: any) => el.textContent)).toContain('it needs a berth that reads run machine version 99');
    // The user can still end it.
    expect((await daemon.api('POST', `/v1/runs/${id}/cancel`)).status).toBe(202);
    await waitForRun(id, (r) => isEndState(r.state));
  });

  it('at 390 px: the nav is one line and the Account page, its rate table included, fits the screen', async () => {
    await page.setViewport({ width: 390, height: 844 });
    try {
      await page.goto(`${daemon.url}/#/account`);
      await page.waitForFunction(() => document.querySelectorAll('table.stack tbody tr').length > 0, { timeout: 15_000 });
      const nav = await page.$$eval('.top nav a', (links: any[]) => links.map((a) => a.getBoundingClientRect().top));
      expect(new Set(nav).size).toBe(1);
      const fits = await page.evaluate(() => ({
        page: document.documentElement.scrollWidth,
        navFull: document.querySelector('.top nav').scrollWidth,
        navShown: document.querySelector('.top nav').clientWidth,
        tableFull: document.querySelector('table.stack').closest('.table-wrap').scrollWidth,
        tableShown: document.querySelector('table.stack').closest('.table-wrap').clientWidth,
      }));
      expect(fits.page).toBeLessThanOrEqual(390);
      expect(fits.navFull).toBeLessThanOrEqual(fits.navShown);
      expect(fits.tableFull).toBeLessThanOrEqual(fits.tableShown);
    } finally {
      await page.setViewport({ width: 1280, height: 900 });
    }
  });

  it('the Submit page starts empty, without an error, and offers an example that is valid', async () => {
    await page.goto(`${daemon.url}/#/submit`);
    await page.waitForSelector('textarea#spec');
    const issues = await page.$eval('#spec-issues', (el: any) => el.textContent as string);
    expect(issues).toContain('Paste a job spec');
    expect(await page.$('.issues')).toBeNull();
    expect(await page.$eval('button.primary', (b: any) => b.disabled)).toBe(true);
    const example = await page.$$('button.small');
    await example[0]!.click();
    await page.waitForFunction(() => document.querySelector('#spec-issues')?.textContent?.includes('The spec is valid.'));
    expect(await page.$eval('button.primary', (b: any) => b.disabled)).toBe(false);
  });

  it('a misspelled search field is named on the Submit page with the nearest known one, as berth validate names it (#30)', async () => {
    await page.goto(`${daemon.url}/#/submit`);
    await page.waitForSelector('textarea#spec');
    const spec = JSON.stringify(jobSpec({ search: { filters: { gpu_nmae: { eq: 'RTX 4090' } } } }));
    await page.$eval(
      'textarea#spec',
      (el: any, text: string) => {
        el.value = text;
        el.dispatchEvent(new Event('input', { bubbles: true }));
      },
      spec,
    );
    await page.waitForFunction(() => document.querySelector('.issues')?.textContent?.includes('did you mean gpu_name?'), {
      timeout: 10_000,
    });
    const shown = await page.$$eval('.issues li', (items) => items.map((i: any) => i.textContent as string));
    expect(shown.join('\n')).toMatch(/search\.filters\.gpu_nmae.*unknown search field; did you mean gpu_name\?/);
    expect(await page.$eval('button.primary', (b: any) => b.disabled)).toBe(true);
  });
});
