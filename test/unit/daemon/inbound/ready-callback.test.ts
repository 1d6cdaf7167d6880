// The readiness callback: per-attempt tokens, the line appended to the onstart (run by a real sh
// against a real listener, with curl and with wget), and the listener's answers.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createReadyCallbackServer } from '../../../../src/daemon/inbound/ready-callback.js';
import { callbackLine, ReadyTokens } from '../../../../src/daemon/inbound/ready-token.js';
import { encodeOnstartWith, ONSTART_MAX_CHARS } from '../../../../src/job-spec/onstart.js';
import { createLogger } from '../../../../src/logger.js';

const tokens = new ReadyTokens(Buffer.alloc(32, 1));
let server: Server | undefined;
const dirs: string[] = [];
afterEach(async () => {
  if (server) await new Promise((r) => server!.close(r));
  server = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A listener that records every READY it passes on; `live` runs are the ones the daemon has. */
async function listener(live = new Set(['runaaaaaaaaa'])) {
  const readies: Array<{ runId: string; n: number }> = [];
  const lines: string[] = [];
  const log = createLogger({ destination: new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString('utf8')), cb()) }) });
  server = createReadyCallbackServer({ tokens, log, ready: (runId, n) => (live.has(runId) ? (readies.push({ runId, n }), true) : false) });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, readies, logText: () => lines.join('') };
}

/** Runs an onstart as the simulator does: `sh -c` in a scratch directory with a stock PATH (or a given one). */
function sh(script: string, path = '/usr/local/bin:/usr/bin:/bin'): Promise<{ code: number | null; out: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-ready-'));
  dirs.push(dir);
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', script], { cwd: dir, env: { PATH: path, HOME: dir, TMPDIR: dir } });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.on('close', (code) => resolve({ code, out }));
  });
}

describe('ReadyTokens', () => {
  it('makes one token per attempt that only this key verifies, naming its run and attempt', () => {
    const t = tokens.tokenFor('runaaaaaaaaa', 3);
    expect(t).toMatch(/^runaaaaaaaaa\.3\.[A-Za-z0-9_-]{43}$/);
    expect(tokens.verify(t)).toEqual({ runId: 'runaaaaaaaaa', n: 3 });
    expect(tokens.tokenFor('runaaaaaaaaa', 4)).not.toBe(t);
    expect(new ReadyTokens(Buffer.alloc(32, 2)).verify(t)).toBeNull();
    // Another attempt's name on this attempt's signature is refused.
    expect(tokens.verify(t.replace('.3.', '.4.'))).toBeNull();
    for (const junk of ['', 'x', `${t}x`, t.slice(0, -1), ` ${t}`, 'RUN.1.' + t.split('.')[2]]) expect(tokens.verify(junk)).toBeNull();
  });
});

describe('the line appended to the onstart', () => {
  it("posts the attempt's token once the user's script has run, printing nothing", async () => {
    const { url, readies } = await listener();
    const token = tokens.tokenFor('runaaaaaaaaa', 2);
    const onstart = encodeOnstartWith('echo "user script"; echo "second line" \\', callbackLine(`${url}/cb`, token))!;
    const { code, out } = await sh(onstart);
    expect(code).toBe(0);
    // The script's own output only (the trailing backslash did not swallow the line).
    expect(out).toBe('user script\nsecond line\n');
    expect(readies).toEqual([{ runId: 'runaaaaaaaaa', n: 2 }]);
  });

  it('uses wget where the image has no curl', async () => {
    const { url, readies } = await listener();
    const bin = mkdtempSync(join(tmpdir(), 'berth-bin-'));
    dirs.push(bin);
    // A PATH with sh's tools and wget, but no curl.
    for (const tool of ['wget', 'cat', 'echo']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
    const { code } = await sh(encodeOnstartWith(undefined, callbackLine(url, tokens.tokenFor('runaaaaaaaaa', 1)))!, bin);
    expect(code).toBe(0);
    expect(readies).toEqual([{ runId: 'runaaaaaaaaa', n: 1 }]);
  });

  it('ends quietly and successfully when the daemon cannot be reached, even under set -e', async () => {
    const line = callbackLine('http://127.0.0.1:9/', tokens.tokenFor('runaaaaaaaaa', 1)).replace('--retry 5', '--retry 0');
    const { code, out } = await sh(`set -e\n${line}\necho after`);
    expect(code).toBe(0);
    expect(out).toBe('after\n');
  });

  it('rides inside the compressed wrapper of a long script, and is left out only when nothing fits', async () => {
    const { url, readies } = await listener();
    const long = Array.from({ length: 300 }, (_, i) => `echo "step ${i}" > /dev/null`).join('\n');
    const sent = encodeOnstartWith(long, callbackLine(url, tokens.tokenFor('runaaaaaaaaa', 5)))!;
    expect(sent.length).toBeLessThanOrEqual(ONSTART_MAX_CHARS);
    expect(sent).toMatch(/base64 -d \| gunzip/);
    expect((await sh(sent)).code).toBe(0);
    expect(readies).toEqual([{ runId: 'runaaaaaaaaa', n: 5 }]);
    // Random text hardly compresses: a script that only just fits leaves no room for the line.
    const barelyFits = `#${randomBytes(2990).toString('base64')}`;
    expect(barelyFits.length).toBeLessThanOrEqual(ONSTART_MAX_CHARS);
    expect(encodeOnstartWith(barelyFits, callbackLine(url, tokens.tokenFor('runaaaaaaaaa', 5)))).toBeNull();
  });
});

describe('the callback listener', () => {
  const post = async (url: string, body: string, method = 'POST') => {
    const res = await request(url, { method: method as 'POST', body, headers: { 'content-type': 'application/json' } });
    return { status: res.statusCode, body: await res.body.text() };
  };

  it('passes a good token on, on any path, and refuses anything else without changing anything', async () => {
    const { url, readies, logText } = await listener();
    const good = tokens.tokenFor('runaaaaaaaaa', 1);
    expect((await post(`${url}/any/prefix`, JSON.stringify({ token: good }))).status).toBe(202);
    expect((await post(url, good)).status).toBe(202); // a plain-text body holding the token
    expect((await post(url, JSON.stringify({ token: good.slice(0, -2) + 'zz' }))).status).toBe(403);
    expect((await post(url, JSON.stringify({ token: 42 }))).status).toBe(400);
    expect((await post(url, '{"token":')).status).toBe(400);
    expect((await post(url, 'x'.repeat(2000))).status).toBe(413);
    expect((await request(url, { method: 'GET' })).statusCode).toBe(405);
    // A good token of a run this daemon does not have (ended, unknown): 410.
    expect((await post(url, JSON.stringify({ token: tokens.tokenFor('runbbbbbbbbb', 1) }))).status).toBe(410);
    expect(readies).toEqual([
      { runId: 'runaaaaaaaaa', n: 1 },
      { runId: 'runaaaaaaaaa', n: 1 },
    ]);
    // Logged: who was refused, never a token.
    expect(logText()).toContain('1 readiness callback with a token this daemon did not make was refused');
    expect(logText()).not.toContain(good.split('.')[2]);
  });
});
