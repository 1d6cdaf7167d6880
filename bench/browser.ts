// A real headless Chromium for the dashboard's tests, its benchmark and its screenshots, driven by puppeteer-core. The browser comes
// from the npm package @sparticuz/chromium (a Chromium build shipped inside the registry package,
// brotli-packed), so `npm ci` is the whole install: nothing is downloaded at run time. It unpacks
// into os.tmpdir() (in a test, the file's own TMPDIR: test/helpers/leak-check.ts); `close()`
// removes what it unpacked.
//
// The package's own launch arguments are not used: they include --disable-web-security, which would
// switch off the very same-origin rules the dashboard's tests check.
import { readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import chromium from '@sparticuz/chromium';
import puppeteer, { type Browser } from 'puppeteer-core';

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const dir = tmpdir();
  const before = new Set(readdirSync(dir));
  const executablePath = await chromium.executablePath();
  // As root in a container there is no user namespace for Chromium's sandbox.
  const browser = await puppeteer.launch({
    executablePath,
    headless: 'shell',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--font-render-hinting=none'],
  });
  return {
    browser,
    async close() {
      await browser.close();
      for (const name of readdirSync(dir)) if (!before.has(name)) rmSync(join(dir, name), { recursive: true, force: true });
    },
  };
}
