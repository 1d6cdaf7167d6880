// The dashboard's way in, over raw HTTP against a real daemon (in process) and the simulator: the
// one-time code, the session cookie, the CSRF token and Origin on state changes, the routes a
// session may not call, the runs list's filters the Runs page uses, and the ends of a session
// (sign-out, token rotation, daemon restart). The browser's side is test/e2e/dashboard.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Run, SignInCode, UiSession } from '../../../src/wire/control-api.js';
import { rawRequest, type RawOptions } from '../../helpers/control-api.js';
import { openSse } from '../../helpers/sse.js';
import { jobSpec, startWorld, type World } from '../../helpers/world.js';

let world: World;
beforeAll(async () => {
  world = await startWorld();
  await world.daemon.ready;
});
afterAll(async () => {
  await world?.close();
});

const req = (method: string, path: string, opts: RawOptions = {}) => rawRequest(world.daemon, method, path, opts);

/**
 * Signs in as the page does: a code with the token, then GET /?code= for the cookie, with the CSRF
 * token in the page's body (never in a URL or a Location: issue #38 item 4).
 */
async function signIn(): Promise<{ cookie: string; csrf: string; setCookie: string }> {
  const code = await req('POST', '/v1/ui/codes');
  expect(code.status).toBe(201);
  const { url } = JSON.parse(code.text) as SignInCode;
  const answer = await req('GET', `/${new URL(url).search}`, { token: null });
  expect(answer.status).toBe(200);
  expect(answer.headers.location).toBeUndefined();
  const csrf = /<meta name="berth-csrf" content="([A-Za-z0-9_-]{43})"/.exec(answer.text)?.[1];
  expect(csrf).toBeDefined();
  const setCookie = String(answer.headers['set-cookie']);
  const cookie = setCookie.split(';')[0]!;
  const session = await req('GET', '/v1/ui/session', { token: null, headers: { cookie, 'x-csrf-token': csrf! } });
  expect(session.status).toBe(200);
  expect((JSON.parse(session.text) as UiSession).csrf_token).toBe(csrf);
  return { cookie, csrf: csrf!, setCookie };
}

const spec = (name: string) => JSON.stringify(jobSpec({ name, max_price_per_hour: 0.001 }));

describe('dashboard sign-in', () => {
  it('sets an HttpOnly, SameSite=Strict session cookie named for the port, from a code that works once', async () => {
    const code = JSON.parse((await req('POST', '/v1/ui/codes')).text) as SignInCode;
    expect(code.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?code=[A-Za-z0-9_-]{43}$/);
    const first = await req('GET', `/${new URL(code.url).search}`, { token: null });
    expect(first.status).toBe(200);
    const port = new URL(world.daemon.url).port;
    expect(String(first.headers['set-cookie'])).toMatch(
      new RegExp(`^berth_session_${port}=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=/$`),
    );
    const again = await req('GET', `/${new URL(code.url).search}`, { token: null });
    expect(again.status).toBe(401);
    expect(again.headers['set-cookie']).toBeUndefined();
    expect(again.text).toContain('berth ui');
  });

  it('serves the page with a policy that allows only its own scripts, and no data without a session', async () => {
    const page = await req('GET', '/', { token: null });
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(page.headers['referrer-policy']).toBe('no-referrer');
    expect((await req('GET', '/v1/runs', { token: null })).status).toBe(401);
    expect(
      (await req('GET', '/v1/runs', { token: null, headers: { cookie: `berth_session_${new URL(world.daemon.url).port}=forged` } })).status,
    ).toBe(401);
  });
});

describe('a dashboard session', () => {
  it('reads only with its CSRF token, and changes state only with it and the daemon’s Origin', async () => {
    const { cookie, csrf } = await signIn();
    const origin = world.daemon.url;
    expect((await req('GET', '/v1/runs', { token: null, headers: { cookie, 'x-csrf-token': csrf } })).status).toBe(200);
    const post = (headers: Record<string, string>) =>
      req('POST', '/v1/runs', {
        token: null,
        headers: { cookie, 'content-type': 'application/json', ...headers },
        body: spec('dash-auth'),
      });
    expect((await post({ origin })).status).toBe(403);
    expect((await post({ origin, 'x-csrf-token': `${csrf}x` })).status).toBe(403);
    expect((await post({ 'x-csrf-token': csrf })).status).toBe(403); // no Origin
    expect((await post({ origin: 'http://127.0.0.1:1', 'x-csrf-token': csrf })).status).toBe(403);
    const made = await post({ origin, 'x-csrf-token': csrf });
    expect(made.status).toBe(201);
    const run = JSON.parse(made.text) as Run;
    // The content type guard stays for sessions too.
    const plain = await req('POST', '/v1/runs', {
      token: null,
      headers: { cookie, origin, 'x-csrf-token': csrf, 'content-type': 'text/plain' },
      body: spec('plain'),
    });
    expect(plain.status).toBe(415);
    await world.waitFor(run.id, (r) => r.state === 'failed');
  });

  it('may not make sign-in codes or rotate the token, and a wrong bearer token is not saved by a good cookie', async () => {
    const { cookie, csrf } = await signIn();
    const origin = world.daemon.url;
    const headers = { cookie, origin, 'x-csrf-token': csrf };
    expect((await req('POST', '/v1/ui/codes', { token: null, headers })).status).toBe(403);
    expect((await req('POST', '/v1/token/rotate', { token: null, headers })).status).toBe(403);
    expect((await req('GET', '/v1/runs', { token: 'wrong', headers: { cookie, 'x-csrf-token': csrf } })).status).toBe(401);
  });

  it("tries every cookie of the session's name: one tossed in by another local page locks no one out and is no session (issue #38 item 6)", async () => {
    const { cookie, csrf } = await signIn();
    const name = cookie.slice(0, cookie.indexOf('='));
    // As a browser sends them: the tossed one (Path=/v1, the longer path) first.
    const both = `${name}=tossed; ${cookie}`;
    expect((await req('GET', '/v1/runs', { token: null, headers: { cookie: both, 'x-csrf-token': csrf } })).status).toBe(200);
    expect((await req('GET', '/v1/runs', { token: null, headers: { cookie: `${name}=tossed`, 'x-csrf-token': csrf } })).status).toBe(401);
  });

  it('gives a server on another port that receives its cookie nothing: no CSRF token, no read, no paid GET, no change (issue #31 items 2, 6)', async () => {
    const { cookie, csrf } = await signIn();
    // Such a server forges the daemon's Origin and Host; all it lacks is what the page keeps.
    const origin = world.daemon.url;
    for (const path of ['/v1/ui/session', '/v1/runs', '/v1/account/checks', '/v1/costs', '/v1/events/stream']) {
      const answer = await req('GET', path, { token: null, headers: { cookie, origin } });
      expect(answer.status, path).toBe(401);
      expect(answer.text, path).not.toContain(csrf);
    }
    const made = await req('POST', '/v1/runs', {
      token: null,
      headers: { cookie, origin, 'content-type': 'application/json' },
      body: spec('forged'),
    });
    expect(made.status).toBe(403);
    // The page's own event stream carries the token in its URL (EventSource sends no header).
    const stream = await openSse(`${world.daemon.url}/v1/events/stream?csrf=${csrf}`, { cookie });
    expect(stream.status).toBe(200);
    stream.close();
  });

  it('answers no-store and nosniff: authenticated JSON, its errors, the event stream and /metrics (issue #31 item 7)', async () => {
    const { cookie, csrf } = await signIn();
    const answers = [
      await req('GET', '/v1/runs'),
      await req('GET', '/v1/ui/session', { token: null, headers: { cookie, 'x-csrf-token': csrf } }),
      await req('GET', '/v1/runs/nope'),
      await req('GET', '/v1/runs', { token: 'wrong' }),
      await req('GET', '/metrics', { token: null }),
      await req('GET', '/healthz', { token: null }),
    ];
    for (const a of answers) {
      expect(a.headers['cache-control'], a.text.slice(0, 80)).toBe('no-store');
      expect(a.headers['x-content-type-options'], a.text.slice(0, 80)).toBe('nosniff');
    }
    const stream = await openSse(`${world.daemon.url}/v1/events/stream`, { authorization: `Bearer ${world.daemon.token}` });
    expect(stream.headers['cache-control']).toBe('no-store');
    expect(stream.headers['x-content-type-options']).toBe('nosniff');
    stream.close();
  });

  it('ends on sign-out, and every session ends on a token rotation, its open event streams with it', async () => {
    const a = await signIn();
    const b = await signIn();
    const streamA = await openSse(`${world.daemon.url}/v1/events/stream?csrf=${a.csrf}`, { cookie: a.cookie });
    const streamB = await openSse(`${world.daemon.url}/v1/events/stream?csrf=${b.csrf}`, { cookie: b.cookie });
    const byToken = await openSse(`${world.daemon.url}/v1/events/stream`, { authorization: `Bearer ${world.daemon.token}` });
    expect([streamA.status, streamB.status, byToken.status]).toEqual([200, 200, 200]);
    const origin = world.daemon.url;
    const out = await req('POST', '/v1/ui/sign-out', { token: null, headers: { cookie: a.cookie, origin, 'x-csrf-token': a.csrf } });
    expect(out.status).toBe(200);
    expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
    expect((await req('GET', '/v1/runs', { token: null, headers: { cookie: a.cookie, 'x-csrf-token': a.csrf } })).status).toBe(401);
    expect(await streamA.ended).toBe(true);
    expect((await req('GET', '/v1/runs', { token: null, headers: { cookie: b.cookie, 'x-csrf-token': b.csrf } })).status).toBe(200);
    const pending = JSON.parse((await req('POST', '/v1/ui/codes')).text) as SignInCode;

    const rotated = await req('POST', '/v1/token/rotate');
    expect(rotated.status).toBe(200);
    expect((await req('GET', '/v1/runs', { token: null, headers: { cookie: b.cookie, 'x-csrf-token': b.csrf } })).status).toBe(401);
    expect(await streamB.ended).toBe(true);
    expect((await req('GET', `/${new URL(pending.url).search}`, { token: null })).status).toBe(401);
    // A stream opened with the old token ends too (issue #31 item 4): it delivered every event, new
    // runs included, after the rotation.
    expect(await byToken.ended).toBe(true);
  });

  it('ends when the daemon restarts: sessions are kept in memory only', async () => {
    const { cookie, csrf } = await signIn();
    await world.restartDaemon();
    await world.daemon.ready;
    const port = new URL(world.daemon.url).port;
    const renamed = cookie.replace(/^berth_session_\d+/, `berth_session_${port}`);
    expect((await req('GET', '/v1/runs', { token: null, headers: { cookie: renamed, 'x-csrf-token': csrf } })).status).toBe(401);
  });
});

describe('GET /v1/runs filters (the Runs page)', () => {
  it('keeps runs by state and by a part of the name, pages within them, and counts them in X-Total-Count', async () => {
    const names = ['filter-alpha-1', 'filter-alpha-2', 'filter-beta-1'];
    const made: Run[] = [];
    for (const name of names)
      made.push(
        JSON.parse((await req('POST', '/v1/runs', { headers: { 'content-type': 'application/json' }, body: spec(name) })).text) as Run,
      );
    for (const r of made) await world.waitFor(r.id, (x) => x.state === 'failed');
    const list = async (q: string) => {
      const a = await req('GET', `/v1/runs?${q}`);
      expect(a.status).toBe(200);
      return { names: (JSON.parse(a.text) as Run[]).map((r) => r.name), total: Number(a.headers['x-total-count']) };
    };
    expect(await list('name=ALPHA')).toEqual({ names: ['filter-alpha-2', 'filter-alpha-1'], total: 2 });
    expect(await list('name=filter-&state=failed&limit=2')).toEqual({ names: ['filter-beta-1', 'filter-alpha-2'], total: 3 });
    expect(await list(`name=filter-&state=failed&limit=2&after=${made[1]!.id}`)).toEqual({ names: ['filter-alpha-1'], total: 3 });
    expect(await list('name=filter-&state=running,cancelled')).toEqual({ names: [], total: 0 });
    expect((await req('GET', '/v1/runs?state=nope')).status).toBe(400);
    // The GPU the spec asks for, and nothing else of it (no env value).
    const withGpu = JSON.parse(
      (
        await req('POST', '/v1/runs', {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(
            jobSpec({
              name: 'gpu',
              max_price_per_hour: 0.001,
              env: { TOKEN: 'sekrit-123' },
              search: { filters: { gpu_name: { in: ['RTX 4090', 'A100'] } }, order: [['dph_total', 'asc']], limit: 4 },
            }),
          ),
        })
      ).text,
    ) as Run;
    expect(withGpu).toMatchObject({ gpu: 'RTX 4090 | A100', gpu_rented: false });
    expect(JSON.stringify(withGpu)).not.toContain('sekrit-123');
    await world.waitFor(withGpu.id, (x) => x.state === 'failed');
  });
});
