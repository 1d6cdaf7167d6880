// Conformance of every endpoint of the seed and of the notes: bodies, quirks and error answers.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, startTestSim, waitFor } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startTestSim();
});
afterAll(() => sim.close());

describe('account endpoints', () => {
  test("GET users/current answers show_user.yaml's record, with api_key null, never the key", async () => {
    const r = await call(sim, 'GET', '/api/v0/users/current/');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      id: expect.any(Number),
      key_id: 1,
      email: expect.any(String),
      balance: expect.any(Number),
      credit: expect.any(Number),
      ssh_key: '',
      sid: expect.any(String),
    });
    expect(r.body).toHaveProperty('api_key', null);
    expect(r.text).not.toContain(sim.apiKey);
    const other = sim.addKey();
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, other)).body.key_id).toBe(2);
  });

  test('accepts paths without the trailing slash', async () => {
    expect((await call(sim, 'GET', '/api/v0/users/current')).status).toBe(200);
  });

  test('secrets: create (upper-cased), list masked, update, delete, with the documented errors', async () => {
    expect((await call(sim, 'POST', '/api/v0/secrets', { key: 'hf_token', value: 'hf_very_secret' })).body).toEqual({
      success: true,
      msg: 'Environment variable added successfully',
    });
    for (const path of ['/api/v0/secrets', '/api/v0/secrets/']) {
      const r = await call(sim, 'GET', path);
      expect(r.body).toEqual({ success: true, secrets: { HF_TOKEN: '*****' } });
      expect(r.text).not.toContain('hf_very_secret');
    }
    const err = (r: { status: number; body: any }) => [r.status, r.body.error];
    expect(err(await call(sim, 'POST', '/api/v0/secrets/', { key: 'HF_TOKEN', value: 'other' }))).toEqual([400, 'existing_key']);
    expect((await call(sim, 'PUT', '/api/v0/secrets/', { key: 'HF_TOKEN', value: 'v2' })).body.success).toBe(true);
    expect(err(await call(sim, 'PUT', '/api/v0/secrets/', { key: 'NOPE', value: 'v2' }))).toEqual([400, 'nonexistent_key']);
    expect((await call(sim, 'DELETE', '/api/v0/secrets/', { key: 'hf_token' })).body).toEqual({
      success: true,
      msg: 'Environment variable deleted successfully',
    });
    expect(err(await call(sim, 'DELETE', '/api/v0/secrets/', { key: 'HF_TOKEN' }))).toEqual([400, 'nonexistent_key']);
    expect(err(await call(sim, 'POST', '/api/v0/secrets/', { key: 'A', value: 5 }))).toEqual([400, 'missing_input']);
    expect(err(await call(sim, 'POST', '/api/v0/secrets/', { key: 'A', value: 'has space' }))).toEqual([400, 'invalid_characters']);
    expect(err(await call(sim, 'POST', '/api/v0/secrets/', { key: '1A', value: 'x' }))).toEqual([400, 'invalid_characters']);
  });

  test('ssh keys: add, list (a bare array), update, delete; the user record shows the newest', async () => {
    const add = await call(sim, 'POST', '/api/v0/ssh/', { ssh_key: 'ssh-ed25519 AAAAC3Nz test@host' });
    expect(add.body).toMatchObject({
      success: true,
      key: { id: expect.any(Number), user_id: expect.any(Number), public_key: 'ssh-ed25519 AAAAC3Nz test@host', deleted_at: null },
    });
    const id = add.body.key.id;
    const list = (await call(sim, 'GET', '/api/v0/ssh/')).body;
    expect(list).toEqual([
      expect.objectContaining({ id, key: 'ssh-ed25519 AAAAC3Nz test@host', created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }),
    ]);
    expect((await call(sim, 'GET', '/api/v0/users/current/')).body.ssh_key).toBe('ssh-ed25519 AAAAC3Nz test@host');
    expect((await call(sim, 'PUT', `/api/v0/ssh/${id}/`, { ssh_key: 'ssh-ed25519 AAAAnew other@host' })).body.key.public_key).toBe(
      'ssh-ed25519 AAAAnew other@host',
    );
    expect((await call(sim, 'DELETE', `/api/v0/ssh/${id}/`)).body).toEqual({ success: true });
    const again = await call(sim, 'DELETE', `/api/v0/ssh/${id}/`);
    expect([again.status, again.body.error]).toEqual([400, 'no_ssh_key']);
    expect((await call(sim, 'POST', '/api/v0/ssh/', {})).body).toEqual({ success: false, error: 'no_ssh_key', msg: 'No ssh key provided' });
    expect((await call(sim, 'POST', '/api/v0/ssh/', { ssh_key: 'not a key' })).status).toBe(400);
  });

  test('gpu names need no key', async () => {
    const r = await call(sim, 'GET', '/api/v0/gpu_names/unique/', undefined, null);
    expect(r.status).toBe(200);
    expect(r.body.gpu_names).toContain('RTX 4090');
    expect(r.body.gpu_names.length).toBeGreaterThanOrEqual(10);
  });
});

describe('templates', () => {
  test('create, list, update, delete by numeric id only', async () => {
    const c = await call(sim, 'POST', '/api/v0/template/', { name: 'torch', image: 'pytorch/pytorch', onstart: 'echo hi' });
    expect(c.status).toBe(200);
    const t = c.body.template;
    expect(t).toMatchObject({ id: expect.any(Number), hash_id: expect.any(String), name: 'torch' });
    expect(c.body.msg).toBe(`Template Created Successfully! New Template ID: ${t.id}`);
    const listed = (await call(sim, 'GET', '/api/v0/template/')).body;
    expect(listed.templates.map((x: any) => x.id)).toContain(t.id);
    expect(listed.templates_found).toBe(listed.templates.length);
    const u = await call(sim, 'PUT', '/api/v0/template/', { id: t.id, name: 'torch2' });
    expect(u.body.template.name).toBe('torch2');
    const byHash = await call(sim, 'DELETE', '/api/v0/template/', { template_id: t.hash_id });
    expect(byHash.status).toBe(400);
    expect(byHash.body.msg).toContain('not its hash_id');
    expect((await call(sim, 'DELETE', '/api/v0/template/', { template_id: t.id })).body).toEqual({ success: true });
    expect((await call(sim, 'DELETE', '/api/v0/template/', { template_id: t.id })).status).toBe(404);
    expect((await call(sim, 'POST', '/api/v0/template/', { name: 'x' })).body.error).toBe('invalid_args');
  });
});

describe('webhooks', () => {
  test('create shows the secret, list hides it, update, rotate, delete', async () => {
    const c = await call(sim, 'POST', '/api/v0/webhooks/', {
      name: 'ops',
      webhook_url: 'http://127.0.0.1:9/hook',
      event_types: ['client:low_credit'],
    });
    expect(c.status).toBe(200);
    const w = c.body.webhook;
    expect(w).toMatchObject({
      id: expect.any(Number),
      user_id: expect.any(Number),
      created_at: expect.any(Number),
      webhook_secret: expect.any(String),
    });
    const list = await call(sim, 'GET', '/api/v0/webhooks/');
    expect(list.body.webhooks[0].webhook_secret).toBeUndefined();
    const u = await call(sim, 'PUT', `/api/v0/webhooks/${w.id}/`, { event_types: ['host:machine_offline'] });
    expect(u.body.webhook.event_types).toEqual(['host:machine_offline']);
    const rot = await call(sim, 'POST', `/api/v0/webhooks/${w.id}/rotate-secret`);
    expect(rot.body.success).toBe(true);
    expect(rot.body.webhook.webhook_secret).not.toBe(w.webhook_secret);
    expect((await call(sim, 'DELETE', `/api/v0/webhooks/${w.id}/`)).body).toEqual({ success: true });
    expect((await call(sim, 'POST', `/api/v0/webhooks/${w.id}/rotate-secret`)).status).toBe(404);
    expect((await call(sim, 'POST', '/api/v0/webhooks/', { webhook_url: 'http://x/', event_types: ['nope'] })).status).toBe(400);
  });
});

describe('instances', () => {
  test('create answers new_contract and instance_api_key; show is a single object', async () => {
    const { instanceId, instanceKey } = await rent(sim, {
      image: 'img',
      disk: 16,
      label: 'berth:s:r:1',
      env: { A: '1' },
      runtype: 'ssh_direc ssh_proxy',
    });
    expect(instanceKey).toMatch(/^[0-9a-f]{64}$/);
    const r = await call(sim, 'GET', `/api/v0/instances/${instanceId}/?owner=me`);
    expect(Array.isArray(r.body.instances)).toBe(false);
    expect(r.body.instances).toMatchObject({
      id: instanceId,
      label: 'berth:s:r:1',
      machine_id: expect.any(Number),
      intended_status: 'running',
      ssh_host: expect.stringMatching(/^ssh\d\.vast-sim\.invalid$/),
      ssh_port: expect.any(Number),
      disk_space: 16,
      extra_env: [['A', '1']],
    });
    for (const f of [
      'host_id',
      'actual_status',
      'cur_state',
      'next_state',
      'status_msg',
      'image_uuid',
      'public_ipaddr',
      'dph_total',
      'is_bid',
      'start_date',
      'gpu_name',
      'num_gpus',
    ]) {
      expect(r.body.instances).toHaveProperty(f);
    }
  });

  test('SSH: ssh_host/ssh_port are the proxy; the direct address is public_ipaddr and ports["22/tcp"], only while running', async () => {
    const direct = sim.offers().find((o) => o.direct_port_count > 0 && o.verified)!;
    const created = await call(sim, 'PUT', `/api/v0/asks/${direct.id}/`, {
      image: 'x',
      runtype: 'ssh_direc ssh_proxy',
      env: { '-p 8080:8080': '1' },
    });
    const id = created.body.new_contract;
    const before = (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
    expect(before.actual_status).not.toBe('running');
    expect(before).not.toHaveProperty('ports');
    const inst = await waitFor(async () => {
      const r = await call(sim, 'GET', `/api/v0/instances/${id}/`);
      return r.body.instances.actual_status === 'running' ? r.body.instances : undefined;
    });
    expect(inst.ssh_host).toMatch(/^ssh\d\.vast-sim\.invalid$/);
    expect(inst.ssh_port).toBeGreaterThanOrEqual(10_000);
    expect(inst.public_ipaddr).toBe(direct.public_ipaddr);
    expect(inst.ports).toEqual({
      '22/tcp': [{ HostIp: '0.0.0.0', HostPort: String(inst.direct_port_start) }],
      '8080/tcp': [{ HostIp: '0.0.0.0', HostPort: String(inst.direct_port_start + 1) }],
    });
    expect(inst.direct_port_end).toBe(inst.direct_port_start + 1);
    expect(Number(inst.ports['22/tcp'][0].HostPort)).not.toBe(inst.ssh_port);
    await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' });
    expect((await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances).not.toHaveProperty('ports');

    // Proxy only: a runtype without direct, or an offer without direct ports.
    const { instanceId: proxied } = await rent(sim, { image: 'x', runtype: 'ssh_proxy' });
    const p = await waitFor(async () => {
      const r = await call(sim, 'GET', `/api/v0/instances/${proxied}/`);
      return r.body.instances.actual_status === 'running' ? r.body.instances : undefined;
    });
    expect(p).toMatchObject({ ports: {}, direct_port_start: -1, direct_port_end: -1 });
    expect(p.ssh_host).toMatch(/\.vast-sim\.invalid$/);
  });

  test('show of an unknown id answers instances: null', async () => {
    const r = await call(sim, 'GET', '/api/v0/instances/1/');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ instances: null });
  });

  test('v0 list answers instances_found and destroyed instances leave it', async () => {
    const { instanceId } = await rent(sim);
    let r = await call(sim, 'GET', '/api/v0/instances/');
    expect(r.body.instances_found).toBe(r.body.instances.length);
    expect(r.body.instances.map((i: any) => i.id)).toContain(instanceId);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${instanceId}/`)).body).toEqual({
      success: true,
      msg: 'Instance destroyed successfully',
    });
    r = await call(sim, 'GET', '/api/v0/instances/');
    expect(r.body.instances.map((i: any) => i.id)).not.toContain(instanceId);
  });

  test('create validates its body: types, onstart length, malformed JSON', async () => {
    const offerId = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })).body.offers[0].id;
    const bad = [
      '{"image": ',
      '[1,2]',
      { disk: 10 },
      { image: 5 },
      { image: 'x', disk: 'lots' },
      { image: 'x', env: { A: 1 } },
      { image: 'x', env: 'A=1' },
      { image: 'x', onstart: 'x'.repeat(4049) },
      { image: 'x', label: 7 },
    ];
    for (const body of bad) {
      const r = await call(sim, 'PUT', `/api/v0/asks/${offerId}/`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(['invalid_args', 'invalid_request']).toContain(r.body.error);
    }
    expect((await call(sim, 'PUT', `/api/v0/asks/abc/`, { image: 'x' })).status).toBe(400);
    // None of them rented the offer.
    expect((await call(sim, 'PUT', `/api/v0/asks/${offerId}/`, { image: 'x', onstart: 'x'.repeat(4048) })).status).toBe(200);
  });

  test('create also accepts POST', async () => {
    const offerId = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })).body.offers[0].id;
    expect((await call(sim, 'POST', `/api/v0/asks/${offerId}/`, { image: 'x' })).body.success).toBe(true);
  });

  test('create on an unknown offer answers 404 invalid_args no_such_ask with ask_id', async () => {
    const r = await call(sim, 'PUT', '/api/v0/asks/1234567/', { image: 'x' });
    expect(r.status).toBe(404);
    expect(r.body).toEqual({
      success: false,
      error: 'invalid_args',
      msg: 'error 404/3603: no_such_ask Instance type by id 1234567 is not available.',
      ask_id: 1234567,
    });
  });

  test('create on a rented offer answers 410 no_such_ask; destroy makes it rentable again', async () => {
    const { offerId, instanceId } = await rent(sim);
    const r = await call(sim, 'PUT', `/api/v0/asks/${offerId}/`, { image: 'x' });
    expect(r.status).toBe(410);
    expect(r.body).toEqual({
      success: false,
      error: 'no_such_ask',
      msg: `error 410/3907: no_such_ask Instance type ${offerId} is no longer available.`,
      ask_id: offerId,
    });
    await call(sim, 'DELETE', `/api/v0/instances/${instanceId}/`);
    expect((await call(sim, 'PUT', `/api/v0/asks/${offerId}/`, { image: 'x' })).status).toBe(200);
  });

  test('bid creates are billed at the bid; below min_bid they cannot start: 410 with cancel_unavail', async () => {
    const offer = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1, type: 'bid' })).body.offers[0];
    const refused = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', price: offer.min_bid / 2, cancel_unavail: true });
    expect([refused.status, refused.body.error]).toEqual([410, 'no_such_ask']);
    const r = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', price: offer.min_bid });
    const show = await call(sim, 'GET', `/api/v0/instances/${r.body.new_contract}/`);
    expect(show.body.instances.is_bid).toBe(true);
    expect(show.body.instances.dph_base).toBe(offer.min_bid);
  });
});

describe('v1 list', () => {
  test('pages of 25 with next_token until null', async () => {
    const own = await startTestSim({ config: { catalog: { size: 100 } } });
    try {
      const offers = (await call(own, 'POST', '/api/v0/bundles/', { limit: 60 })).body.offers;
      for (const o of offers.slice(0, 57)) await call(own, 'PUT', `/api/v0/asks/${o.id}/`, { image: 'x' });
      const ids: number[] = [];
      let token: string | null = null;
      const sizes: number[] = [];
      do {
        const q: string = token ? `&after_token=${encodeURIComponent(token)}` : '';
        const r = await call(own, 'GET', `/api/v1/instances/?select_filters={}&limit=25${q}`);
        expect(r.body.success).toBe(true);
        expect(r.body.total_instances).toBe(57);
        expect(r.body.instances_found).toBe(r.body.instances.length);
        sizes.push(r.body.instances.length);
        ids.push(...r.body.instances.map((i: any) => i.id));
        token = r.body.next_token;
      } while (token);
      expect(sizes).toEqual([25, 25, 7]);
      expect(new Set(ids).size).toBe(57);
      expect((await call(own, 'GET', '/api/v1/instances/?after_token=garbage')).status).toBe(400);
      expect((await call(own, 'GET', '/api/v1/instances/?limit=0')).body.instances).toHaveLength(5); // ≤ 0 means 5 (show_instances.yaml)
    } finally {
      await own.close();
    }
  });

  test('the v0 list answers 410 deprecated_endpoint by default, a plain 404 or the old list as configured', async () => {
    for (const [mode, check] of [
      [
        undefined,
        (r: any) =>
          expect(r).toMatchObject({ status: 410, body: { success: false, error: 'deprecated_endpoint', msg: expect.any(String) } }),
      ],
      ['404', (r: any) => expect(r).toMatchObject({ status: 404, text: 'Not Found' })],
      ['answers', (r: any) => expect(r).toMatchObject({ status: 200, body: { instances_found: 0, instances: [] } })],
    ] as const) {
      const own = await startSimulator({ config: { rate_limits: { enabled: false }, ...(mode ? { v0_list: mode } : {}) } });
      try {
        check(await call(own, 'GET', '/api/v0/instances/'));
        expect((await call(own, 'GET', '/api/v1/instances/')).status).toBe(200);
      } finally {
        await own.close();
      }
    }
  });
});

describe('generic errors', () => {
  test('unknown route answers the generic 404 body; wrong method 405', async () => {
    const r = await call(sim, 'GET', '/api/v0/nothing/here/');
    expect(r.status).toBe(404);
    expect(r.body).toMatchObject({ success: false, error: 'not_found' });
    expect((await call(sim, 'PATCH', '/api/v0/instances/')).status).toBe(405);
  });

  test('a body that is not an object is 400 invalid_request', async () => {
    expect((await call(sim, 'POST', '/api/v0/bundles/', '"text"')).body.error).toBe('invalid_request');
    expect((await call(sim, 'POST', '/api/v0/bundles/', '{nope')).status).toBe(400);
  });

  test('a body over 1 MB is refused, not buffered', async () => {
    const r = await call(sim, 'POST', '/api/v0/bundles/', JSON.stringify({ pad: 'x'.repeat(1_100_000) }));
    expect(r.status).toBe(413);
  });

  test('admin endpoints are 404 unless enabled', async () => {
    const off = await startSimulator({ config: { rate_limits: { enabled: false } } });
    try {
      for (const path of ['/_sim/stats', '/_sim/history', '/_sim/reset']) {
        expect((await call(off, 'GET', path)).status).toBe(404);
      }
    } finally {
      await off.close();
    }
  });
});
