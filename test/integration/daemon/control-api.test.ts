// The control API on its own: a real daemon (in process) against the simulator, raw HTTP requests,
// and every answer checked against the wire contract's schemas (src/wire/control-api.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  ErrorEnvelopeSchema,
  HealthSchema,
  ProofSchema,
  RotatedSchema,
  RunEventSchema,
  RunSchema,
  type ErrorKind,
  type Run,
} from '../../../src/wire/control-api.js';
import { rawRequest, type RawOptions } from '../../helpers/control-api.js';
import { jobSpec, startWorld, type World } from '../../helpers/world.js';

let world: World;
beforeAll(async () => {
  world = await startWorld();
  await world.daemon.ready;
});
afterAll(async () => {
  await world?.close();
});

/** A spec no offer matches: its run fails at once, so the tests need no instance. */
const cheap = (name: string) => jobSpec({ name, max_price_per_hour: 0.001 });

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

async function raw(method: string, path: string, opts: RawOptions = {}): Promise<Raw> {
  const { status, headers, text } = await rawRequest(world.daemon, method, path, opts);
  return { status, headers, body: text ? JSON.parse(text) : undefined };
}

const json = (method: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  raw(method, path, { headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

/** An error answer: the envelope is the contract's, with this status and kind. */
function expectProblem(res: Raw, status: number, kind: ErrorKind): z.infer<typeof ErrorEnvelopeSchema>['error'] {
  expect([res.status, (res.body as { error?: { kind?: string } })?.error?.kind]).toEqual([status, kind]);
  return ErrorEnvelopeSchema.parse(res.body).error;
}

async function submit(name: string, headers: Record<string, string> = {}): Promise<Run> {
  const res = await json('POST', '/v1/runs', cheap(name), headers);
  expect(res.status).toBe(201);
  return RunSchema.parse(res.body);
}

describe('control API: who may call it', () => {
  it('answers /healthz and the proof without a token, in the contract shape', async () => {
    const health = await raw('GET', '/healthz', { token: null });
    expect(health.status).toBe(200);
    expect(HealthSchema.parse(health.body)).toMatchObject({ ok: true, store_id: world.daemon.storeId, ready: true });
    const proof = await raw('GET', `/v1/proof?nonce=${'ab'.repeat(16)}`, { token: null });
    expect(proof.status).toBe(200);
    expect(ProofSchema.parse(proof.body).proof).toMatch(/^[0-9a-f]{64}$/);
  });

  it('rotating the token answers {rotated: true}, and the old token is refused from then on', async () => {
    const old = world.daemon.token;
    const res = await raw('POST', '/v1/token/rotate');
    expect(res.status).toBe(200);
    expect(RotatedSchema.parse(res.body)).toEqual({ rotated: true });
    expect(world.daemon.token).not.toBe(old);
    expectProblem(await raw('GET', '/v1/runs', { token: old }), 401, 'unauthorized');
    expect((await raw('GET', '/v1/runs')).status).toBe(200);
  });

  it.each([
    ['GET', '/v1/runs'],
    ['POST', '/v1/runs'],
    ['GET', '/v1/runs/nosuchrun'],
    ['POST', '/v1/token/rotate'],
    ['GET', '/v1/nothing-here'],
    ['DELETE', '/v1/runs/nosuchrun'],
  ])('%s %s without the right token is 401, before anything else is said', async (method, path) => {
    for (const token of [null, 'wrong', '']) expectProblem(await raw(method, path, { token }), 401, 'unauthorized');
  });
});

describe('control API: routes and methods', () => {
  it('404 for an unknown route and an unknown run', async () => {
    expectProblem(await raw('GET', '/v1/nothing-here'), 404, 'not_found');
    expectProblem(await raw('GET', '/v1/runs/nosuchrun'), 404, 'not_found');
    expectProblem(await raw('GET', '/v1/runs/nosuchrun/events'), 404, 'not_found');
    expectProblem(await raw('POST', '/v1/runs/nosuchrun/cancel'), 404, 'not_found');
  });

  it('405 with an Allow header for a path that takes other methods (DELETE /v1/runs/{id} included)', async () => {
    const run = await submit('m405');
    const del = await raw('DELETE', `/v1/runs/${run.id}`);
    expectProblem(del, 405, 'method_not_allowed');
    expect(del.headers.allow).toBe('GET');
    const put = await raw('PUT', '/v1/runs');
    expectProblem(put, 405, 'method_not_allowed');
    expect(put.headers.allow).toBe('POST, GET');
    expect((await raw('GET', `/v1/runs/${run.id}/cancel`)).headers.allow).toBe('POST');
  });

  it('the cancel takes no body, or {"no_outputs": true|false}; any other body is 400 and cancels nothing (issue #48)', async () => {
    const run = await submit('cancel-body');
    expectProblem(await json('POST', `/v1/runs/${run.id}/cancel`, { no_outputs: 'yes' }), 400, 'bad_request');
    expectProblem(await json('POST', `/v1/runs/${run.id}/cancel`, { now: true }), 400, 'bad_request');
    expectProblem(
      await raw('POST', `/v1/runs/${run.id}/cancel`, { headers: { 'content-type': 'application/json' }, body: '{not json' }),
      400,
      'bad_request',
    );
    expect((await raw('GET', `/v1/runs/${run.id}`)).body).toMatchObject({ state: expect.not.stringMatching(/^cancelled$/) });
    expect((await json('POST', `/v1/runs/${run.id}/cancel`, { no_outputs: true })).status).toBe(202);
  });

  it('400 for an unreadable path escape or query number', async () => {
    expectProblem(await raw('GET', '/v1/runs/%E0%A4%A'), 400, 'bad_request');
    expectProblem(await raw('GET', '/v1/runs?limit=-1'), 400, 'bad_request');
    expectProblem(await raw('GET', '/v1/runs?after=nosuchrun'), 400, 'bad_request');
  });
});

describe('control API: bodies', () => {
  it('413 for a body over 1 MiB, and nothing is stored', async () => {
    const before = (await raw('GET', '/v1/runs?limit=10000')).body as Run[];
    const big = JSON.stringify(cheap('big')).replace('"name"', `"pad":"${'x'.repeat(1024 * 1024)}","name"`);
    expectProblem(await raw('POST', '/v1/runs', { headers: { 'content-type': 'application/json' }, body: big }), 413, 'too_large');
    expect(((await raw('GET', '/v1/runs?limit=10000')).body as Run[]).length).toBe(before.length);
  });

  it('415 for a body that is not application/json', async () => {
    expectProblem(
      await raw('POST', '/v1/runs', { headers: { 'content-type': 'text/plain' }, body: JSON.stringify(cheap('t')) }),
      415,
      'unsupported_media_type',
    );
  });

  it('400 spec with every issue for an invalid job spec', async () => {
    const err = expectProblem(await json('POST', '/v1/runs', { name: 'x' }), 400, 'spec');
    expect(err.issues?.map((i) => i.path)).toEqual(expect.arrayContaining(['$.image', '$.max_price_per_hour']));
  });
});

describe('control API: Idempotency-Key', () => {
  it('replays the same run (200) for the same key and spec, and refuses another spec under it (409, nothing stored)', async () => {
    const first = await submit('idem', { 'idempotency-key': 'key-1' });
    const again = await json('POST', '/v1/runs', cheap('idem'), { 'idempotency-key': 'key-1' });
    expect(again.status).toBe(200);
    expect(RunSchema.parse(again.body).id).toBe(first.id);
    const count = ((await raw('GET', '/v1/runs?limit=10000')).body as Run[]).length;
    const conflict = await json('POST', '/v1/runs', cheap('other'), { 'idempotency-key': 'key-1' });
    expect(expectProblem(conflict, 409, 'idempotency_conflict').run_id).toBe(first.id);
    expect(((await raw('GET', '/v1/runs?limit=10000')).body as Run[]).length).toBe(count);
  });
});

describe('control API: paging', () => {
  it('GET /v1/runs pages newest first with ?limit and ?after=<last id>, never repeating or skipping a run', async () => {
    for (let i = 0; i < 5; i++) await world.waitFor((await submit(`page-${i}`)).id, (r) => r.state === 'failed');
    const all = ((await raw('GET', '/v1/runs?limit=10000')).body as unknown[]).map((r) => RunSchema.parse(r));
    expect(all.map((r) => r.created_at)).toEqual([...all.map((r) => r.created_at)].sort().reverse());
    const paged: Run[] = [];
    for (let after: string | undefined; ;) {
      const page = (await raw('GET', `/v1/runs?limit=2${after ? `&after=${after}` : ''}`)).body as Run[];
      expect(page.length).toBeLessThanOrEqual(2);
      if (page.length === 0) break;
      paged.push(...page);
      after = page.at(-1)!.id;
    }
    expect(paged.map((r) => r.id)).toEqual(all.map((r) => r.id));
    // Each run carries its attempts as GET /v1/runs/{id} shows them.
    for (const run of all.slice(0, 5)) expect(RunSchema.parse((await raw('GET', `/v1/runs/${run.id}`)).body)).toEqual(run);
  });

  it('GET /v1/runs/{id}/events pages oldest first with ?after=<last id> and ?limit', async () => {
    const run = await submit('events');
    await world.waitFor(run.id, (r) => r.state === 'failed');
    const all = ((await raw('GET', `/v1/runs/${run.id}/events`)).body as unknown[]).map((e) => RunEventSchema.parse(e));
    expect(all.length).toBeGreaterThan(2);
    const first = (await raw('GET', `/v1/runs/${run.id}/events?limit=1`)).body as Array<{ id: number }>;
    expect(first.map((e) => e.id)).toEqual([all[0]!.id]);
    const rest = (await raw('GET', `/v1/runs/${run.id}/events?after=${all[0]!.id}`)).body as Array<{ id: number }>;
    expect(rest.map((e) => e.id)).toEqual(all.slice(1).map((e) => e.id));
  });
});

describe('control API: while the daemon stops', () => {
  it('503 daemon_stopping for a submit once the runs are stopping, and nothing is stored', async () => {
    const count = ((await raw('GET', '/v1/runs?limit=10000')).body as Run[]).length;
    world.daemon.supervisor.stop();
    expectProblem(await json('POST', '/v1/runs', cheap('late')), 503, 'daemon_stopping');
    expect(((await raw('GET', '/v1/runs?limit=10000')).body as Run[]).length).toBe(count);
  });
});
