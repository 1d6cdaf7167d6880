// The web dashboard in a real headless Chromium (issue #22) against a real daemon process and the
// simulator: sign-in with `berth ui`'s one-time code (and refusal of a used or wrong one), a run
// submitted from the page that fails over once and reaches running while the page follows it
// without a reload, a cancel from the page, the money chart showing the run's spend, a page of
// another origin that cannot act, and `berth token rotate` ending the session.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import type { CostsReport, Run, RunEvent } from '../../src/wire/control-api.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { launchBrowser, type TestBrowser } from '../../bench/browser.js';
import { eventLagsMs, runsFirstRenderMs, seedEndedRuns } from '../../bench/dashboard.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { FAST_CONFIG, FAST_SIM, jobSpec, offersInTryOrder } from '../helpers/world.js';

// The page's globals, in the functions evaluated in the browser (the test itself compiles without the DOM library).
declare const document: any, window: any, location: any, localStorage: any;

const SECRET = 'env-secret-value-5b1f0c2e';

let sim: RunningSimulator;
let daemon: DaemonProcess;
let home: string;
let tb: TestBrowser;
let page: Page;
let runId: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 22, config: FAST_SIM });
  home = mkdtempSync(join(tmpdir(), 'berth-dash-'));
  [daemon, tb] = await Promise.all([spawnDaemon({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG }), launchBrowser()]);
  page = await tb.browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
}, 60_000);

afterAll(async () => {
  await tb?.close();
  if (daemon && daemon.proc.exitCode === null) await daemon.stop();
  await sim?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

/** `berth ui` as a user runs it: the sign-in URL it prints. */
async function signInUrl(): Promise<string> {
  const r = await berth(['ui', '--no-open'], userEnv(home));
  expect(r.code, r.stderr).toBe(0);
  const url = r.stdout.trim();
  expect(url).toMatch(new RegExp(`^${daemon.url}/\\?code=[A-Za-z0-9_-]{43}$`));
  return url;
}

/** Waits until the page's text holds `text` (the page updates itself; nothing reloads it). */
const waitForText = (p: Page, selector: string, text: string, timeout = 30_000) =>
  p.waitForFunction(
    (sel: string, want: string) => [...document.querySelectorAll(sel)].some((e: any) => e.textContent?.includes(want)),
    { timeout, polling: 50 },
    selector,
    text,
  );

describe('the web dashboard', () => {
  it('signs in with the one-time code of `berth ui` and refuses it used again, or a wrong one', async () => {
    const url = await signInUrl();
    const first = await page.goto(url);
    // Redirected to drop the code from the URL.
    expect(page.url()).toBe(`${daemon.url}/`);
    expect(first?.status()).toBe(200);
    await waitForText(page, 'h1', 'Runs');
    const [cookie] = await page.cookies();
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    // No script of the page can read it.
    expect(await page.evaluate(() => document.cookie)).toBe('');

    // The same link again, in a browser context of its own: refused.
    const other = await tb.browser.createBrowserContext();
    try {
      const p2 = await other.newPage();
      const again = await p2.goto(url);
      expect(again?.status()).toBe(401);
      expect(await p2.content()).toContain('cannot be used');
      const wrong = await p2.goto(`${daemon.url}/?code=${'x'.repeat(43)}`);
      expect(wrong?.status()).toBe(401);
      expect(await p2.cookies()).toEqual([]);
      // Without a session the page says how to sign in, and the API answers nothing.
      await p2.goto(`${daemon.url}/`);
      await waitForText(p2, 'h1', 'Not signed in');
      const status = await p2.evaluate(async () => (await fetch('/v1/runs')).status);
      expect(status).toBe(401);
    } finally {
      await other.close();
    }
  });

  it('signs in through `berth ui` beside a local user who reads every command line: that reader cannot sign in, the CSRF token is in no URL (issue #38 item 4)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-opener-'));
    // A desktop's opener that keeps running until released, so the reader sees it at work.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'xdg-open'),
      `#!/bin/sh\nprintf '%s\\n' "$@" > '${dir}/opened'\nwhile [ ! -e '${dir}/release' ]; do sleep 0.05; done\n`,
      { mode: 0o755 },
    );
    // Another local user's process: reads /proc/*/cmdline of every process, over and over, and
    // writes down every argument it saw.
    const seenFile = join(dir, 'seen');
    const reader = spawn(
      process.execPath,
      [
        '-e',
        `const fs = require('fs'); const seen = new Set();
         for (;;) {
           for (const pid of fs.readdirSync('/proc')) {
             if (!/^\\d+$/.test(pid)) continue;
             try { for (const a of fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').split('\\0')) if (a && !seen.has(a)) { seen.add(a); fs.appendFileSync(${JSON.stringify(seenFile)}, JSON.stringify(a) + '\\n'); } } catch {}
           }
         }`,
      ],
      { stdio: 'ignore' },
    );
    // Whole lines only: the reader may be writing the last one.
    const seen = () =>
      existsSync(seenFile)
        ? readFileSync(seenFile, 'utf8')
            .split('\n')
            .slice(0, -1)
            .map((l) => JSON.parse(l) as string)
        : [];
    const until = async (what: string, ok: () => boolean) => {
      for (let i = 0; !ok(); i++) {
        if (i > 600) throw new Error(`waited too long for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const context = await tb.browser.createBrowserContext();
    try {
      await until('the reader to start', () => seen().length > 0);
      const r = await berth(['ui'], userEnv(home, { DISPLAY: ':0', PATH: `${bin}:${process.env.PATH}` }));
      expect(r.code, r.stderr).toBe(0);
      await until('the opener', () => existsSync(join(dir, 'opened')));
      const [opened] = readFileSync(join(dir, 'opened'), 'utf8').trim().split('\n');
      // The reader saw the opener at work, with all it was given.
      await until('the reader to see the opener', () => seen().includes(opened!));
      writeFileSync(join(dir, 'release'), '');

      // The opener got a page only its owner can read, not the code.
      expect(opened).toMatch(/^file:\/\//);
      expect(opened).not.toContain('code=');
      const file = fileURLToPath(opened!);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(statSync(dirname(file)).mode & 0o777).toBe(0o700);

      // The reader tries everything it read as a code, and every URL of the daemon: none signs in.
      const words = seen().flatMap((a) => [...a.matchAll(/[A-Za-z0-9_-]{40,}/g)].map((m) => m[0]));
      for (const word of new Set(words)) {
        const tried = await raw('GET', `/?code=${word}`, {});
        expect(tried.status, `signed in with "${word}" read from a command line`).toBe(401);
      }
      for (const url of seen().filter((a) => a.startsWith(daemon.url))) {
        expect((await raw('GET', url.slice(daemon.url.length), {})).status).not.toBe(200);
      }

      // The owner's browser opens the page the opener was given, and is signed in.
      const p = await context.newPage();
      // Every address the tab went to and every redirect it was given.
      const urls: string[] = [];
      p.on('framenavigated', (f) => urls.push(f.url()));
      // The page's own event stream carries the token as ?csrf= (EventSource sends no header): not a navigation.
      p.on('response', (res) => res.request().isNavigationRequest() && urls.push(res.url(), res.headers().location ?? ''));
      await p.goto(opened!);
      await waitForText(p, 'h1', 'Runs');
      expect(p.url()).toBe(`${daemon.url}/`);
      const csrf = (await p.evaluate(() => localStorage.getItem('berth_csrf'))) as string;
      expect(csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(urls.filter((u) => u.includes(csrf))).toEqual([]);
      // Signed in for real: the page reads the account.
      await p.goto(`${daemon.url}/#/account`);
      await waitForText(p, '.summary', 'serving');
    } finally {
      reader.kill('SIGKILL');
      writeFileSync(join(dir, 'release'), '');
      await context.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps working with a cookie of the session's name tossed in on Path=/v1 by a page on another port (issue #38 item 6)", async () => {
    const context = await tb.browser.createBrowserContext();
    try {
      const p = await context.newPage();
      await p.goto(await signInUrl());
      await waitForText(p, 'h1', 'Runs');
      const name = `berth_session_${new URL(daemon.url).port}`;
      const other: Server = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html', 'set-cookie': `${name}=tossed; Path=/v1` });
        res.end('<!doctype html><p>elsewhere</p>');
      });
      await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
      try {
        await p.goto(`http://127.0.0.1:${(other.address() as AddressInfo).port}/`);
      } finally {
        await new Promise((r) => other.close(r));
      }
      // The browser holds both, the tossed one first for the API's paths.
      const held = (await p.cookies(`${daemon.url}/v1/runs`)).filter((c) => c.name === name);
      expect(held.map((c) => c.path).sort()).toEqual(['/', '/v1']);
      await p.goto(`${daemon.url}/#/account`);
      await waitForText(p, '.summary', 'serving');
      // A change from the page goes through too.
      const created = await p.evaluate(
        async (spec: string) => {
          const csrf = localStorage.getItem('berth_csrf') ?? '';
          const res = await fetch('/v1/runs', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
            body: spec,
          });
          return { status: res.status, id: ((await res.json()) as { id?: string }).id };
        },
        JSON.stringify(jobSpec({ name: 'tossed-cookie', max_price_per_hour: 0.001 })),
      );
      expect(created.status).toBe(201);
      await daemon.api('POST', `/v1/runs/${created.id}/cancel`);
    } finally {
      await context.close();
    }
  });

  it('submits a run that fails over once and reaches running, the page following it without a reload', async () => {
    const spec = jobSpec({ name: 'dash-failover', env: { API_SECRET: SECRET } });
    const [first] = await offersInTryOrder({ sim }, spec);
    sim.setOfferProfile(first!.id, 'exited');

    await page.goto(`${daemon.url}/#/submit`);
    await page.waitForSelector('textarea#spec');
    const typeSpec = (text: string) =>
      page.$eval(
        'textarea#spec',
        (el, t) => {
          (el as any).value = t;
          el.dispatchEvent(new Event('input', { bubbles: true }));
        },
        text,
      );
    // Checked as it is typed, every issue at its path.
    await typeSpec(JSON.stringify({ ...spec, disk_gb: 'twenty', surprise: true }));
    await waitForText(page, '.issues li', '$.disk_gb');
    await waitForText(page, '.issues li', '$.surprise');
    expect(await page.$eval('button.primary', (b) => (b as any).disabled)).toBe(true);
    await typeSpec(JSON.stringify(spec, null, 2));
    await waitForText(page, '#spec-issues', 'The spec is valid.');
    await page.evaluate(() => (window.notReloaded = true));
    await page.click('button.primary');

    await page.waitForFunction(() => location.hash.startsWith('#/runs/'), { timeout: 10_000 });
    runId = decodeURIComponent(await page.evaluate(() => location.hash.slice('#/runs/'.length)));
    // The first attempt's bar says how it ended, in words; the second runs.
    await page.waitForSelector('.attempt[data-attempt="1"][data-outcome="exited"]', { timeout: 30_000 });
    await waitForText(page, 'h1 .badge', 'running');
    await page.waitForSelector('.attempt[data-attempt="2"][data-outcome="running"]', { timeout: 30_000 });
    await waitForText(page, '.events li', 'attempt #2');
    expect(await page.evaluate(() => window.notReloaded)).toBe(true);

    const run = (await daemon.api<Run>('GET', `/v1/runs/${runId}`)).body;
    expect(run.state).toBe('running');
    expect(run.attempts.map((a) => a.outcome)).toEqual(['exited', 'running']);
    // The GPU rented (the spec asks for one per offer): the second attempt's offer's, and each
    // attempt's own on the timeline.
    const [firstTried, running] = run.attempts;
    expect(firstTried!.gpu_name).toBe(first!.gpu_name);
    expect(running).toMatchObject({ gpu_name: expect.any(String), num_gpus: 1 });
    expect(run).toMatchObject({ gpu: running!.gpu_name, gpu_rented: true });
    await waitForText(page, '.attempt[data-attempt="1"] .facts', first!.gpu_name);
    await waitForText(page, '.attempt[data-attempt="2"] .facts', running!.gpu_name!);
    // The SSH line to copy is the run's own.
    const ssh = run.instance!.ssh[0]!;
    await waitForText(page, '.ssh code', `ssh -p ${ssh.port} root@${ssh.host}`);
    // No env value in the page.
    expect(await page.content()).not.toContain(SECRET);
  });

  it('cancels the run from the page, after a confirmation; a Runs page showing live runs drops it', async () => {
    // Another tab of the same browser, on the Runs page filtered to live runs.
    const runsTab = await page.browserContext().newPage();
    await runsTab.goto(`${daemon.url}/#/`);
    await runsTab.waitForSelector('table.runs');
    const live = await runsTab.$$eval('select option', (options) => options.find((o: any) => o.textContent.startsWith('live'))!.value);
    await runsTab.select('select', live);
    await runsTab.waitForSelector(`tr[data-run="${runId}"]`);
    await waitForText(runsTab, '.filters', 'live ·');
    // The GPU column shows the model the running run rents, not what its spec asks for.
    const { gpu } = (await daemon.api<Run>('GET', `/v1/runs/${runId}`)).body;
    expect(await runsTab.$eval(`tr[data-run="${runId}"] td[data-label="GPU"]`, (td) => td.textContent)).toBe(gpu);

    await page.bringToFront();
    // From the keyboard: Enter on the button opens the dialog on its safe choice; Escape keeps the run.
    await page.focus('.actions button.danger');
    await page.keyboard.press('Enter');
    await page.waitForSelector('dialog[open]');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Keep it');
    await page.keyboard.press('Escape');
    await page.waitForSelector('dialog[open]', { hidden: true });
    expect((await daemon.api<Run>('GET', `/v1/runs/${runId}`)).body.state).toBe('running');

    await page.click('.actions button.danger');
    await page.waitForSelector('dialog[open]');
    await page.click('dialog[open] button.danger');
    await waitForText(page, 'h1 .badge', 'cancelled');
    const run = (await daemon.api<Run>('GET', `/v1/runs/${runId}`)).body;
    expect(run.state).toBe('cancelled');
    expect(sim.billingNow().filter((h) => h.label?.includes(runId))).toEqual([]);
    await runsTab.waitForFunction((id: string) => !document.querySelector(`tr[data-run="${id}"]`), { timeout: 10_000 }, runId);
    await runsTab.close();
  });

  it("shows the run's spend in the money chart, its bar named with the run's id (names repeat: issue #50)", async () => {
    await page.goto(`${daemon.url}/#/money`);
    const bar = `#chart-runs li[data-label="dash-failover (${runId})"]`;
    await page.waitForSelector(bar, { timeout: 10_000 });
    const shown = await page.$eval(`${bar} .bar-value`, (e) => e.textContent);
    const since = new Date(Date.now() - 6 * 86_400_000).toISOString().slice(0, 10);
    const report = (await daemon.api<CostsReport>('GET', `/v1/costs?since=${since}`)).body;
    const usd = report.runs.find((r) => r.id === runId)!.usd;
    expect(usd).toBeGreaterThan(0);
    expect(shown).toBe(`$${usd.toFixed(4)}`);
  });

  it("shows the account: the daemon, the credit, the doctor's checks made by the daemon, the rate limits met", async () => {
    await page.goto(`${daemon.url}/#/account`);
    await waitForText(page, '.summary', 'serving');
    await waitForText(page, '.summary', '$');
    await page.click('section[aria-labelledby="doctor"] button');
    await page.waitForSelector('.checks li', { timeout: 20_000 });
    const checks = await page.$$eval('.checks li', (items) => items.map((i: any) => i.textContent as string));
    expect(checks.find((c) => c.includes('service'))).toMatch(/^ok/);
    expect(checks.find((c) => c.includes('key'))).toMatch(/^ok/);
    await waitForText(page, 'section[aria-labelledby="rate-limits"] td', 'create');
  });

  it('lets no page of another origin act, and no request without the CSRF token', async () => {
    const runs = async () => (await daemon.api<Run[]>('GET', '/v1/runs')).body.length;
    const before = await runs();
    const body = JSON.stringify(jobSpec({ name: 'csrf' }));
    // A page on another port of 127.0.0.1: the same site to SameSite, so the cookie goes with its requests.
    const evil: Server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        `<!doctype html><form id="f" method="POST" action="${daemon.url}/v1/runs" enctype="text/plain"><input name='${body.slice(0, -1)}, "x": "' value='"}'></form>`,
      );
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    try {
      const evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
      await page.goto(evilUrl);
      const tries = await page.evaluate(
        async (target: string, spec: string) => {
          const outcome = async (p: Promise<Response>) =>
            p.then(
              (r) => `answered ${r.type} ${r.status}`,
              (e: Error) => `failed: ${e.name}`,
            );
          return [
            // Preflighted (JSON): the daemon never lets it through.
            await outcome(
              fetch(`${target}/v1/runs`, {
                method: 'POST',
                credentials: 'include',
                headers: { 'content-type': 'application/json' },
                body: spec,
              }),
            ),
            // Simple (no preflight): sent with the cookie, its answer unreadable; refused by its Origin.
            await outcome(fetch(`${target}/v1/runs`, { method: 'POST', credentials: 'include', mode: 'no-cors', body: spec })),
            await outcome(fetch(`${target}/v1/runs/x/cancel`, { method: 'POST', credentials: 'include', mode: 'no-cors' })),
            // Reading: no CORS header, so the page gets nothing.
            await outcome(fetch(`${target}/v1/runs`, { credentials: 'include' })),
          ];
        },
        daemon.url,
        body,
      );
      expect(tries[0]).toBe('failed: TypeError');
      expect(tries[1]).toBe('answered opaque 0');
      expect(tries[2]).toBe('answered opaque 0');
      expect(tries[3]).toBe('failed: TypeError');
      // A plain form post, navigating the page to the daemon: refused for its Origin.
      const [answer] = await Promise.all([page.waitForNavigation(), page.evaluate(() => (document.getElementById('f') as any).submit())]);
      expect(answer?.status()).toBe(403);
    } finally {
      await new Promise((r) => evil.close(r));
    }
    expect(await runs()).toBe(before);

    // The session cookie itself, sent by hand with the daemon's own Origin: without the CSRF token
    // refused, with it accepted (so the refusals above are not for want of a session).
    const cookie = (await page.cookies(daemon.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    const post = (headers: Record<string, string>) =>
      raw('POST', '/v1/runs', { cookie, origin: daemon.url, 'content-type': 'application/json', ...headers }, body);
    expect((await post({})).status).toBe(403);
    expect((await post({ 'x-csrf-token': 'not-the-token' })).status).toBe(403);
    // The cookie alone does not give the CSRF token (a server on another port may receive the
    // cookie: issue #31 item 2); the page keeps it in its origin's storage.
    const sessionRead = await raw('GET', '/v1/ui/session', { cookie, origin: daemon.url });
    expect(sessionRead.status).toBe(401);
    await page.goto(`${daemon.url}/#/`);
    await waitForText(page, 'h1', 'Runs');
    const session = { csrf_token: (await page.evaluate(() => localStorage.getItem('berth_csrf'))) as string };
    expect(sessionRead.text).not.toContain(session.csrf_token);
    const { origin: _o, ...withoutOrigin } = { cookie, origin: '', 'content-type': 'application/json', 'x-csrf-token': session.csrf_token };
    expect((await raw('POST', '/v1/runs', withoutOrigin, body)).status).toBe(403);
    // A session may not do what only the token may.
    expect((await raw('POST', '/v1/ui/codes', { cookie, origin: daemon.url, 'x-csrf-token': session.csrf_token })).status).toBe(403);
    const ok = await post({ 'x-csrf-token': session.csrf_token });
    expect(ok.status).toBe(201);
    await daemon.api('POST', `/v1/runs/${(JSON.parse(ok.text) as Run).id}/cancel`);
  });

  it('gives a server on another port the browser is sent to nothing with the cookie it receives, and runs no paid GET for its images (issue #31 items 2, 6)', async () => {
    const searches = async () => {
      const text = await (await fetch(`${daemon.url}/metrics`)).text();
      return [...text.matchAll(/^berth_service_requests_total\{group="search",[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    };
    await page.goto(`${daemon.url}/#/`);
    await waitForText(page, 'h1', 'Runs');
    const before = { runs: (await daemon.api<Run[]>('GET', '/v1/runs')).body.length, searches: await searches() };
    // A server on another port of 127.0.0.1: cookies are not kept apart by port, so a link to it
    // hands it the session cookie. Its page also asks the daemon for a paid GET, 12 times.
    const received: string[] = [];
    const imgs = Array.from({ length: 12 }, (_, i) => `<img src="${daemon.url}/v1/account/checks?i=${i}">`).join('');
    const other: Server = createServer((req, res) => {
      if (req.headers.cookie) received.push(req.headers.cookie);
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><p>elsewhere</p>${imgs}`);
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    try {
      await page.goto(`http://127.0.0.1:${(other.address() as AddressInfo).port}/`);
      await page.waitForNetworkIdle({ idleTime: 300 });
    } finally {
      await new Promise((r) => other.close(r));
    }
    const cookie = received.find((c) => c.includes('berth_session_'));
    expect(cookie).toBeDefined();
    // All it can do with the cookie, forging the daemon's own Origin: nothing.
    const session = await raw('GET', '/v1/ui/session', { cookie: cookie!, origin: daemon.url });
    expect(session.status).toBe(401);
    expect((await raw('GET', '/v1/runs', { cookie: cookie!, origin: daemon.url })).status).toBe(401);
    const body = JSON.stringify(jobSpec({ name: 'forged' }));
    expect((await raw('POST', '/v1/runs', { cookie: cookie!, origin: daemon.url, 'content-type': 'application/json' }, body)).status).toBe(
      403,
    );
    expect((await daemon.api<Run[]>('GET', '/v1/runs')).body.length).toBe(before.runs);
    expect(await searches()).toBe(before.searches);
    // The page itself still works with the same cookie: it holds the CSRF token.
    await page.goto(`${daemon.url}/#/account`);
    await waitForText(page, '.summary', 'serving');
  });

  it('ends every session on `berth token rotate`: the open page says so without a reload', async () => {
    await page.goto(`${daemon.url}/#/`);
    await waitForText(page, 'h1', 'Runs');
    await waitForText(page, '.filters', 'live');
    await page.evaluate(() => (window.notReloaded = true));
    const r = await berth(['token', 'rotate'], userEnv(home));
    expect(r.code, r.stderr).toBe(0);
    // Its event stream ended with the session; the page's next read is refused.
    await waitForText(page, 'h1', 'Not signed in', 10_000);
    expect(await page.evaluate(() => window.notReloaded)).toBe(true);
    await page.reload();
    await waitForText(page, 'h1', 'Not signed in');
  });
});

describe('the web dashboard at scale', () => {
  let big: DaemonProcess | undefined;
  let bigHome: string | undefined;
  afterAll(async () => {
    if (big && big.proc.exitCode === null) await big.stop();
    if (bigHome) rmSync(bigHome, { recursive: true, force: true });
  });

  // How fast (first render, event lag) is the bench's to say (`npm run bench`, bench/dashboard.ts):
  // a duration asserted here failed on a loaded machine (1101.5 ms against a 1,000 ms bound).
  it('opens the runs page with 10,000 runs in the store on its first 50, and shows the stored events on a run page as they come', async () => {
    bigHome = mkdtempSync(join(tmpdir(), 'berth-dash-big-'));
    seedEndedRuns(bigHome, 10_000, jobSpec());
    big = await spawnDaemon({ home: bigHome, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
    const d = big;
    const signIn = async () => (await d.api<{ url: string }>('POST', '/v1/ui/codes')).body.url;
    const render = await runsFirstRenderMs(tb.browser, await signIn());
    expect(render.rows).toBe(50);
    expect(render.total).toBe('10000 runs');

    const spec = jobSpec({ name: 'latency' });
    const [first] = await offersInTryOrder({ sim }, spec);
    sim.setOfferProfile(first!.id, 'exited');
    let runId = '';
    const submit = async () => (runId = (await d.api<Run>('POST', '/v1/runs', spec)).body.id);
    const read = async (id: string) => ({
      run: (await d.api<Run>('GET', `/v1/runs/${id}`)).body,
      events: (await d.api<RunEvent[]>('GET', `/v1/runs/${id}/events`)).body,
    });
    // Every stored event of the run reached its page, those stored while it was open by the event
    // stream (their lag is the bench's figure).
    const { lags, missing } = await eventLagsMs(tb.browser, await signIn(), submit, read, (r) => r.state === 'running');
    expect(missing).toEqual([]);
    expect(lags.length).toBeGreaterThanOrEqual(3);
    await d.api('POST', `/v1/runs/${runId}/cancel`);
    await d.waitFor(runId, (x) => x.state === 'cancelled');
  }, 90_000);
});

function raw(method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${daemon.url}${path}`, { method, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
