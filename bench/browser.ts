// A real headless Chromium for the dashboard's tests, its benchmark and its screenshots, driven by puppeteer-core. The browser comes
// from the npm package @sparticuz/chromium (a Chromium build shipped inside the registry package,
// brotli-packed), so `npm ci` is the whole install: nothing is downloaded at run time. It unpacks
// into os.tmpdir(), which must be a temp dir of the caller's own (a test file's, made by
// test/helpers/leak-check.ts; a bench's, by ./private-tmp.ts): `close()` removes everything that
// appeared there since the launch, which in the machine's shared /tmp would take other processes'
// files too, so a launch in a temp dir that is not berth's own is refused.
//
// Chromium links the system's NSS (Debian's libnss3, on this machine kind's image; .ci/run installs
// it where it is missing). The package's own launch arguments are not used: they include --disable-web-security, which would
// switch off the very same-origin rules the dashboard's tests check.
import { readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import chromium from '@sparticuz/chromium';
import puppeteer, { type Browser } from 'puppeteer-core';

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const dir = tmpdir();
  if (!basename(dir).startsWith('berth-')) {
    throw new Error(`launchBrowser needs a temp dir of its own (TMPDIR is ${dir}): import bench/private-tmp.ts first`);
  }
  const before = new Set(readdirSync(dir));
  const executablePath = await chromium.executablePath();
  // As root in a container there is no user namespace for Chromium's sandbox.
  const browser = await puppeteer.launch({
    executablePath,
    headless: 'shell',
    // No background traffic: this machine's network is closed, and a test needs none of it.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--no-first-run',
      '--font-render-hinting=none',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-quic',
    ],
  });
  return {
    browser,
    async close() {
      await browser.close();
      for (const name of readdirSync(dir)) if (!before.has(name)) rmSync(join(dir, name), { recursive: true, force: true });
    },
  };
}
