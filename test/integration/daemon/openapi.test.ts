// GET /v1/openapi.json against the daemon's real answers: a daemon in process against the
// simulator, every route called (successes and the errors each can give), and every answer checked
// with ajv (JSON Schema 2020-12, OpenAPI 3.1's dialect) against the document the daemon serves.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobSpecJsonSchema } from '../../../src/job-spec/validate.js';
import type { Run } from '../../../src/wire/control-api.js';
import { rawRequest, type RawOptions } from '../../helpers/control-api.js';
import { openSse } from '../../helpers/sse.js';
import { jobSpec, startWorld, type World } from '../../helpers/world.js';

let world: World;
let receiver: Server;
let doc: {
  openapi: string;
  paths: Record<
    string,
    Record<string, { responses: Record<string, { content: Record<string, { schema: unknown; 'x-item-schema'?: unknown }> }> }>
  >;
  components: { schemas: Record<string, unknown> };
};
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });

beforeAll(async () => {
  receiver = createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()));
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  world = await startWorld({ config: { notify: [{ url, format: 'json' }] } as never });
  await world.daemon.ready;
});
afterAll(async () => {
  await world?.close();
  await new Promise((r) => receiver?.close(r));
});

interface Answer {
  method: string;
  /** The route as the document names it (`/v1/runs/{id}`). */
  route: string;
  status: number;
  contentType: string;
  text: string;
}

const answers: Answer[] = [];

async function call(method: string, path: string, route: string, opts: RawOptions = {}): Promise<Answer> {
  const res = await rawRequest(world.daemon, method, path, opts);
  const answer = { method, route, status: res.status, contentType: String(res.headers['content-type'] ?? ''), text: res.text };
  answers.push(answer);
  return answer;
}
const post = (path: string, route: string, body: unknown, headers: Record<string, string> = {}) =>
  call('POST', path, route, { headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

/** The schema the document gives for this answer: its status's, as JSON Schema ajv can compile. */
function schemaFor(a: Answer, media = 'application/json', key: 'schema' | 'x-item-schema' = 'schema'): object {
  const op = doc.paths[a.route]?.[a.method.toLowerCase()];
  expect(op, `${a.method} ${a.route} is in the document`).toBeDefined();
  const response = op!.responses[String(a.status)];
  expect(response, `${a.method} ${a.route} documents status ${a.status}`).toBeDefined();
  const content = response!.content[media];
  expect(content, `${a.method} ${a.route} ${a.status} documents ${media}`).toBeDefined();
  return {
    $ref: `openapi.json#/paths/${encodeURIComponent(a.route.replace(/~/g, '~0').replace(/\//g, '~1'))}/${a.method.toLowerCase()}/responses/${a.status}/content/${encodeURIComponent(media.replace(/\//g, '~1'))}/${key}`,
  };
}

function validate(a: Answer): void {
  const media = a.contentType.split(';')[0]!.trim();
  if (media !== 'application/json') {
    schemaFor(a, media); // documented with this media type
    return;
  }
  const check = ajv.compile(schemaFor(a));
  const body: unknown = JSON.parse(a.text);
  expect(check(body), `${a.method} ${a.route} ${a.status}: ${ajv.errorsText(check.errors)}\n${a.text.slice(0, 500)}`).toBe(true);
}

describe('GET /v1/openapi.json', () => {
  it('is an OpenAPI 3.1 document, served without a token, whose job spec is the schema `berth schema` prints', async () => {
    const res = await call('GET', '/v1/openapi.json', '/v1/openapi.json', { token: null });
    expect(res.status).toBe(200);
    doc = JSON.parse(res.text) as typeof doc;
    expect(doc.openapi).toBe('3.1.0');
    ajv.addSchema(doc, 'openapi.json');
    const { $schema: _d, ...jobSpec } = jobSpecJsonSchema() as Record<string, unknown>;
    expect(doc.components.schemas.JobSpec).toEqual(jobSpec);
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        '/',
        '/assets/{file}',
        '/healthz',
        '/metrics',
        '/v1/account',
        '/v1/account/checks',
        '/v1/blobs/{sha256}',
        '/v1/ui/codes',
        '/v1/ui/session',
        '/v1/ui/sign-out',
        '/v1/costs',
        '/v1/events/stream',
        '/v1/notifications',
        '/v1/offers',
        '/v1/openapi.json',
        '/v1/proof',
        '/v1/runs',
        '/v1/runs/{id}',
        '/v1/runs/{id}/cancel',
        '/v1/runs/{id}/events',
        '/v1/runs/{id}/logs',
        '/v1/runs/{id}/outputs',
        '/v1/runs/{id}/resume',
        '/v1/token/rotate',
      ].sort(),
    );
  });

  it('every answer of every route, successes and errors, validates against the document', async () => {
    const spec = jobSpec({ name: 'openapi-run' });
    const created = await post('/v1/runs', '/v1/runs', spec, { 'idempotency-key': 'oa-1' });
    expect(created.status).toBe(201);
    const run = JSON.parse(created.text) as Run;
    expect((await post('/v1/runs', '/v1/runs', spec, { 'idempotency-key': 'oa-1' })).status).toBe(200);
    expect((await post('/v1/runs', '/v1/runs', jobSpec({ name: 'other' }), { 'idempotency-key': 'oa-1' })).status).toBe(409);
    expect((await post('/v1/runs', '/v1/runs', { name: 'x' })).status).toBe(400);
    expect((await call('POST', '/v1/runs', '/v1/runs', { headers: { 'content-type': 'text/plain' }, body: '{}' })).status).toBe(415);
    const big = JSON.stringify(spec).replace('"name"', `"pad":"${'x'.repeat(1024 * 1024)}","name"`);
    expect((await call('POST', '/v1/runs', '/v1/runs', { headers: { 'content-type': 'application/json' }, body: big })).status).toBe(413);

    // A run with an instance, so the run object is checked with every field set.
    await world.waitFor(run.id, (r) => r.state === 'running');
    // And one that fails, with an error and ended attempts.
    const failing = JSON.parse((await post('/v1/runs', '/v1/runs', jobSpec({ name: 'fails', max_price_per_hour: 0.001 }))).text) as Run;
    await world.waitFor(failing.id, (r) => r.state === 'failed');

    expect((await call('GET', '/healthz', '/healthz', { token: null })).status).toBe(200);
    expect((await call('GET', `/v1/proof?nonce=${'ab'.repeat(16)}`, '/v1/proof', { token: null })).status).toBe(200);
    expect((await call('GET', '/v1/proof?nonce=zz', '/v1/proof', { token: null })).status).toBe(400);
    expect((await call('GET', '/metrics', '/metrics', { token: null })).status).toBe(200);
    expect((await call('GET', '/v1/runs?limit=2', '/v1/runs')).status).toBe(200);
    expect((await call('GET', '/v1/runs?after=nosuch', '/v1/runs')).status).toBe(400);
    expect((await call('GET', '/v1/runs', '/v1/runs', { token: 'wrong' })).status).toBe(401);
    expect((await call('GET', '/v1/runs', '/v1/runs', { headers: { host: 'evil.example:80' } })).status).toBe(403);
    expect((await call('GET', `/v1/runs/${run.id}`, '/v1/runs/{id}')).status).toBe(200);
    expect((await call('GET', '/v1/runs/nosuch', '/v1/runs/{id}')).status).toBe(404);
    expect((await call('GET', `/v1/runs/${run.id}/logs?tail=20`, '/v1/runs/{id}/logs')).status).toBe(200);
    expect((await call('GET', `/v1/runs/${run.id}/events`, '/v1/runs/{id}/events')).status).toBe(200);
    expect((await call('POST', `/v1/runs/${run.id}/resume`, '/v1/runs/{id}/resume')).status).toBe(409);
    expect((await call('POST', '/v1/runs/nosuch/cancel', '/v1/runs/{id}/cancel')).status).toBe(404);
    expect((await call('POST', `/v1/runs/${run.id}/cancel`, '/v1/runs/{id}/cancel')).status).toBe(202);
    await world.waitFor(run.id, (r) => r.state === 'cancelled');
    // The notifications of both runs went out (or are on their way).
    const notified = await call('GET', '/v1/notifications', '/v1/notifications');
    expect(notified.status).toBe(200);
    expect((JSON.parse(notified.text) as unknown[]).length).toBeGreaterThanOrEqual(3);
    expect((await call('GET', '/v1/notifications?state=nope', '/v1/notifications')).status).toBe(400);
    expect((await call('GET', '/v1/events/stream?run=nosuch', '/v1/events/stream')).status).toBe(404);
    expect((await call('GET', '/v1/costs', '/v1/costs')).status).toBe(200);
    expect((await post('/v1/offers', '/v1/offers', jobSpec({ name: 'offers' }))).status).toBe(200);
    expect((await post('/v1/offers', '/v1/offers', { name: 'x' })).status).toBe(400);
    expect((await call('POST', '/v1/offers', '/v1/offers', { headers: { 'content-type': 'text/plain' }, body: '{}' })).status).toBe(415);
    expect((await call('GET', '/v1/costs?since=someday', '/v1/costs')).status).toBe(400);
    const own = await call('GET', '/v1/costs?service=false', '/v1/costs');
    expect(own.status).toBe(200);
    expect(JSON.parse(own.text)).toMatchObject({ service: { compared: false, note: 'not asked' } });
    expect((await call('GET', '/v1/costs?service=maybe', '/v1/costs')).status).toBe(400);

    // The stream: its media type is documented, and every message's data is a StreamEvent.
    const stream = await openSse(`${world.daemon.url}/v1/events/stream?run=${run.id}`, { authorization: `Bearer ${world.daemon.token}` });
    expect([stream.status, stream.headers['content-type']]).toEqual([200, 'text/event-stream; charset=utf-8']);
    await stream.ended;
    const streamAnswer: Answer = { method: 'GET', route: '/v1/events/stream', status: 200, contentType: 'text/event-stream', text: '' };
    schemaFor(streamAnswer, 'text/event-stream');
    const item = ajv.compile(schemaFor(streamAnswer, 'text/event-stream', 'x-item-schema'));
    const data = stream.messages.filter((m) => m.event === 'message').map((m) => JSON.parse(m.data) as unknown);
    expect(data.length).toBeGreaterThan(3);
    for (const d of data) expect(item(d), ajv.errorsText(item.errors)).toBe(true);

    expect((await call('GET', '/v1/runs?state=running,cancelled&name=OPENAPI', '/v1/runs')).status).toBe(200);
    expect((await call('GET', '/v1/runs?state=bogus', '/v1/runs')).status).toBe(400);
    expect((await call('GET', '/v1/account', '/v1/account')).status).toBe(200);
    expect((await call('GET', '/v1/account/checks', '/v1/account/checks')).status).toBe(200);

    // The dashboard: its page and assets, a sign-in code, the session it is traded for.
    expect((await call('GET', '/', '/', { token: null })).status).toBe(200);
    expect((await call('GET', '/assets/app.js', '/assets/{file}', { token: null })).status).toBe(200);
    expect((await call('GET', '/assets/nosuch.js', '/assets/{file}', { token: null })).status).toBe(404);
    const code = await post('/v1/ui/codes', '/v1/ui/codes', {});
    expect(code.status).toBe(201);
    const signInPath = new URL((JSON.parse(code.text) as { url: string }).url).search;
    const signedIn = await rawRequest(world.daemon, 'GET', `/${signInPath}`, { token: null });
    answers.push({
      method: 'GET',
      route: '/',
      status: signedIn.status,
      contentType: String(signedIn.headers['content-type']),
      text: signedIn.text,
    });
    expect(signedIn.status).toBe(200);
    expect((await call('GET', `/${signInPath}`, '/', { token: null })).status).toBe(401);
    const cookie = String(signedIn.headers['set-cookie']).split(';')[0]!;
    // The CSRF token comes in the page's body; without it the cookie reads nothing.
    const csrf = /<meta name="berth-csrf" content="([^"]+)"/.exec(signedIn.text)![1]!;
    expect((await call('GET', '/v1/ui/session', '/v1/ui/session', { token: null, headers: { cookie } })).status).toBe(401);
    const session = await call('GET', '/v1/ui/session', '/v1/ui/session', { token: null, headers: { cookie, 'x-csrf-token': csrf } });
    expect(session.status).toBe(200);
    expect((await call('GET', '/v1/ui/session', '/v1/ui/session')).status).toBe(400);
    expect((JSON.parse(session.text) as { csrf_token: string }).csrf_token).toBe(csrf);
    const origin = world.daemon.url;
    expect((await call('POST', '/v1/ui/sign-out', '/v1/ui/sign-out', { token: null, headers: { cookie, origin } })).status).toBe(403);
    expect((await call('POST', '/v1/ui/sign-out', '/v1/ui/sign-out')).status).toBe(400);
    expect(
      (await call('POST', '/v1/ui/sign-out', '/v1/ui/sign-out', { token: null, headers: { cookie, origin, 'x-csrf-token': csrf } })).status,
    ).toBe(200);
    expect((await call('GET', '/v1/ui/session', '/v1/ui/session', { token: null, headers: { cookie, 'x-csrf-token': csrf } })).status).toBe(
      401,
    );

    // A task's files: a packed workdir kept under its hash (then known), one with the wrong hash
    // refused; a run's outputs that were never kept.
    const blob = Buffer.from('a workdir, packed');
    const sha = createHash('sha256').update(blob).digest('hex');
    const octets = { 'content-type': 'application/octet-stream' };
    expect((await call('POST', `/v1/blobs/${sha}`, '/v1/blobs/{sha256}', { headers: octets, body: blob })).status).toBe(201);
    expect((await call('POST', `/v1/blobs/${sha}`, '/v1/blobs/{sha256}', { headers: octets, body: blob })).status).toBe(200);
    expect((await call('POST', `/v1/blobs/${'0'.repeat(64)}`, '/v1/blobs/{sha256}', { headers: octets, body: blob })).status).toBe(400);
    expect((await call('GET', `/v1/runs/${run.id}/outputs?attempt=1&name=model.bin`, '/v1/runs/{id}/outputs')).status).toBe(404);
    expect((await call('GET', '/v1/runs/nosuch/outputs?attempt=1&name=x', '/v1/runs/{id}/outputs')).status).toBe(404);

    expect((await call('POST', '/v1/token/rotate', '/v1/token/rotate')).status).toBe(200);

    // Every answer above, against the document.
    for (const a of answers) validate(a);
    const seen = new Set(answers.map((a) => `${a.method} ${a.route}`));
    for (const [path, ops] of Object.entries(doc.paths))
      for (const m of Object.keys(ops)) expect(seen, `${m.toUpperCase()} ${path} was called`).toContain(`${m.toUpperCase()} ${path}`);
  });
});
