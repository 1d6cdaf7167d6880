// Keys as in seed section 5: bearer or ?api_key, 401 for missing/bad/deleted/reset keys, 403 naming
// the missing category, the restricted instance key, and immediate key create/reset/delete.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, startTestSim } from './helpers.js';

const SCOPED = 'scoped-key-with-four-categories';
const READER = 'reader-key-instance-read-only';
let sim: RunningSimulator;

beforeAll(async () => {
  sim = await startTestSim({
    config: {
      keys: [
        { key: SCOPED, permissions: { api: { misc: {}, user_read: {}, instance_read: {}, instance_write: {} } } },
        { key: READER, name: 'reader', permissions: { api: { instance_read: {} } } },
      ],
    },
  });
});
afterAll(() => sim.close());

const AUTH_ERROR = { success: false, error: 'auth_error', msg: 'Invalid user key' };

describe('401', () => {
  test('missing, malformed and unknown keys', async () => {
    expect(await call(sim, 'GET', '/api/v0/users/current/', undefined, null)).toMatchObject({ status: 401, body: AUTH_ERROR });
    expect(await call(sim, 'GET', '/api/v0/users/current/', undefined, 'wrong')).toMatchObject({ status: 401, body: AUTH_ERROR });
    const res = await fetch(`${sim.url}/api/v0/users/current/`, { headers: { authorization: `Basic ${sim.apiKey}` } });
    expect(res.status).toBe(401);
  });

  test('the api_key query parameter of older clients works', async () => {
    const res = await fetch(`${sim.url}/api/v0/users/current/?api_key=${sim.apiKey}`);
    expect(res.status).toBe(200);
  });
});

describe('403 names the missing category', () => {
  test('a key with the four berth categories can search, rent and read but not manage keys or secrets', async () => {
    expect((await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 }, SCOPED)).status).toBe(200);
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, SCOPED)).status).toBe(200);
    expect((await call(sim, 'GET', '/api/v1/instances/', undefined, SCOPED)).status).toBe(200);
    const keys = await call(sim, 'POST', '/api/v0/auth/apikeys/', { name: 'x' }, SCOPED);
    expect(keys.status).toBe(403);
    expect(keys.body).toMatchObject({ success: false, error: 'permission_denied', permission: 'user_write' });
    expect(keys.body.msg).toContain('requires permission user_write');
    expect((await call(sim, 'POST', '/api/v0/secrets/', { key: 'A', value: 'b' }, SCOPED)).status).toBe(403);
  });

  test('templates: search needs user_read, create/edit/delete user_write (permissions.mdx)', async () => {
    expect((await call(sim, 'GET', '/api/v0/template/', undefined, SCOPED)).status).toBe(200);
    const c = await call(sim, 'POST', '/api/v0/template/', { name: 't', image: 'x' }, SCOPED);
    expect([c.status, c.body.permission]).toEqual([403, 'user_write']);
    expect((await call(sim, 'GET', '/api/v0/template/', undefined, READER)).body.permission).toBe('user_read');
  });

  test('a read-only key may list but not search or create', async () => {
    expect((await call(sim, 'GET', '/api/v0/instances/', undefined, READER)).status).toBe(200);
    const s = await call(sim, 'POST', '/api/v0/bundles/', {}, READER);
    expect(s.status).toBe(403);
    expect(s.body.msg).toContain('requires permission misc');
    const c = await call(sim, 'PUT', `/api/v0/asks/${sim.offers()[0]!.id}/`, { image: 'x' }, READER);
    expect(c.status).toBe(403);
    expect(c.body.msg).toContain('requires permission instance_write');
  });
});

describe('instance_api_key', () => {
  test('may stop, start and destroy its own instance and nothing else', async () => {
    const a = await rent(sim);
    const b = await rent(sim);
    const key = a.instanceKey;
    expect((await call(sim, 'GET', '/api/v0/instances/', undefined, key)).status).toBe(403);
    expect((await call(sim, 'GET', `/api/v0/instances/${a.instanceId}/`, undefined, key)).status).toBe(403);
    expect((await call(sim, 'POST', '/api/v0/bundles/', {}, key)).status).toBe(403);
    expect((await call(sim, 'PUT', `/api/v0/instances/${a.instanceId}/`, { label: 'mine' }, key)).status).toBe(403);
    expect((await call(sim, 'PUT', `/api/v0/instances/${b.instanceId}/`, { state: 'stopped' }, key)).status).toBe(403);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${b.instanceId}/`, undefined, key)).status).toBe(403);
    expect((await call(sim, 'PUT', `/api/v0/instances/${a.instanceId}/`, { state: 'stopped' }, key)).body).toEqual({ success: true });
    expect((await call(sim, 'PUT', `/api/v0/instances/${a.instanceId}/`, { state: 'running' }, key)).body.success).toBe(true);
    expect((await call(sim, 'PUT', `/api/v0/instances/reboot/${a.instanceId}/`, {}, key)).status).toBe(403);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${a.instanceId}/`, undefined, key)).body.success).toBe(true);
    // The instance is gone and so is its key.
    expect((await call(sim, 'DELETE', `/api/v0/instances/${a.instanceId}/`, undefined, key)).status).toBe(401);
  });
});

describe('key management takes effect at once', () => {
  test('create, list without values, reset invalidates the old value, delete gives 401', async () => {
    const c = await call(sim, 'POST', '/api/v0/auth/apikeys/', { name: 'ci', permissions: { api: { user_read: {} } } });
    expect(c.status).toBe(200);
    const { id, key } = c.body;
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, key)).status).toBe(200);
    expect((await call(sim, 'GET', '/api/v0/instances/', undefined, key)).status).toBe(403);

    expect(c.body.permissions).toEqual({ api: { user_read: {} } });
    const list = await call(sim, 'GET', '/api/v0/auth/apikeys/');
    expect(list.body.apikeys.find((k: any) => k.id === id)).toMatchObject({
      id,
      name: 'ci',
      user_id: expect.any(Number),
      rights: 'scoped',
    });
    expect(list.text).not.toContain(key);

    const reset = await call(sim, 'POST', `/api/v0/auth/apikeys/${id}/reset/`);
    expect(reset.body.key).not.toBe(key);
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, key)).status).toBe(401);
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, reset.body.key)).status).toBe(200);

    // delete_api_key.yaml: 200 is a JSON string, 404 a bare {msg}.
    expect((await call(sim, 'DELETE', `/api/v0/auth/apikeys/${id}/`)).body).toBe('Successfully Deleted API Key');
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, reset.body.key)).status).toBe(401);
    expect(await call(sim, 'DELETE', `/api/v0/auth/apikeys/${id}/`)).toMatchObject({ status: 404, body: { msg: 'API Key not found.' } });
  });

  test('a scoped key cannot mint a key with more than it holds', async () => {
    const writer = sim.addKey({ api: { user_write: {} } });
    expect((await call(sim, 'POST', '/api/v0/auth/apikeys/', { permissions: { api: { user_write: {} } } }, writer)).status).toBe(200);
    const full = await call(sim, 'POST', '/api/v0/auth/apikeys/', { name: 'escalate' }, writer);
    expect(full.status).toBe(403);
    const more = await call(sim, 'POST', '/api/v0/auth/apikeys/', { permissions: { api: { billing: {} } } }, writer);
    expect(more.body.msg).toContain('requires permission billing');
    expect((await call(sim, 'POST', '/api/v0/auth/apikeys/', { permissions: { api: [] } })).body.error).toBe('invalid_permissions');
  });
});
