// A running task's output on its run page without a click (issue #50), in a real headless Chromium
// against a spawned daemon that follows the task over SSH on the simulator's sshd: the page reads
// the output as soon as the task runs, under "Output (live)", and each line the task prints after
// appears by the event stream; the "ended attempts" box holds only attempts that ended. Order, not
// time, is the proof: the task waits for a file the test writes only once the page showed its line.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../../bench/browser.js';
import type { Run } from '../../src/wire/control-api.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

// The page's globals, in the functions evaluated in the browser (the test compiles without the DOM library).
declare const document: any;

const world = useSpawnedWorld();
let tb: TestBrowser;
let goDir: string | undefined;

beforeAll(async () => {
  tb = await launchBrowser();
}, 60_000);
afterAll(async () => {
  await tb?.close();
});
afterEach(() => {
  if (goDir) rmSync(goDir, { recursive: true, force: true });
  goDir = undefined;
});

const textOf = (p: Page, selector: string): Promise<string> =>
  p.evaluate((sel: string) => [...document.querySelectorAll(sel)].map((e: any) => e.textContent ?? '').join('\n'), selector);

const waitForText = (p: Page, selector: string, text: string, timeout = 30_000) =>
  p.waitForFunction(
    (sel: string, want: string) => [...document.querySelectorAll(sel)].some((e: any) => e.textContent?.includes(want)),
    { timeout, polling: 50 },
    selector,
    text,
  );

it("shows a running task's output live on its run page, without a click, then keeps the ended attempt's lines apart", async () => {
  const { home, daemon } = await world.sshWorld({ seed: 14, onstartTimeoutS: 90, homePrefix: 'berth-dash-live-' });
  goDir = mkdtempSync('/tmp/berth-dash-live-go-');
  chmodSync(goDir, 0o755);
  const spec = jobSpec({
    name: 'live-page',
    ready_when: 'status',
    run: `for k in 1 2; do echo "epoch $k"; while [ ! -e ${goDir}/go$k ]; do sleep 0.1; done; done; echo "all done"`,
  });
  const created = await daemon.api<Run>('POST', '/v1/runs', spec);
  expect(created.status).toBe(201);
  const runId = created.body.id;

  const page = await tb.browser.newPage();
  const ui = await berth(['ui', '--no-open'], userEnv(home));
  expect(ui.code, ui.stderr).toBe(0);
  await page.goto(ui.stdout.trim());
  await page.waitForFunction(() => document.querySelector('h1')?.textContent?.includes('Runs'), { timeout: 15_000 });
  await page.goto(`${daemon.url}/#/runs/${encodeURIComponent(runId)}`);

  // No click: the output is read once the task runs, under a title that says it is live.
  await waitForText(page, '#output', 'Output (live)', 60_000);
  await waitForText(page, 'section[aria-labelledby="output"] .log, section[aria-labelledby="output"] pre', 'epoch 1', 60_000);
  expect(await textOf(page, 'section[aria-labelledby="output"]')).not.toContain('epoch 2');
  expect(await page.$('section[aria-labelledby="output"] button')).toBeNull();
  // The running attempt's kept tail is not shown as an ended attempt's.
  expect(await page.$('#attempt-logs')).toBeNull();
  writeFileSync(join(goDir, 'go1'), '');
  // The next line comes by itself, printed after the page showed the first.
  await waitForText(page, 'section[aria-labelledby="output"]', 'epoch 2', 30_000);
  writeFileSync(join(goDir, 'go2'), '');

  await daemon.waitFor(runId, isEnded, 30_000);
  await waitForText(page, '#output', 'Container output', 30_000);
  await waitForText(page, 'section[aria-labelledby="attempt-logs"]', 'all done', 30_000);
  await page.close();
}, 150_000);
