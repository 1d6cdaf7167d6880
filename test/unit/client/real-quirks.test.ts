// What the real service sends and the simulator did not (issue #30), through the client against a
// real HTTP server: each case fails without its fix in src/client/.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import { AmbiguousCreateError, AuthError, PermissionError, ServiceHttpError } from '../../../src/errors.js';
import { json, startFakeServer, testConfig, type FakeServer } from './fake-server.js';

let server: FakeServer;
let client: MarketplaceClient;
beforeEach(async () => {
  server = await startFakeServer();
  client = createMarketClient({ baseUrl: server.url, apiKey: 'sk-real-quirks-0123456789', config: testConfig() });
});
afterEach(async () => {
  await client.close();
  await server.close();
});

const padded = {
  id: 41,
  label: 'berth:s:r:1\n',
  machine_id: 9,
  actual_status: 'running ',
  ssh_host: 'ssh4.vast.ai\n',
  ssh_port: 10600,
  public_ipaddr: '127.0.0.1\n',
  ports: { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: '40022 ' }] },
  gpu_util: -1,
  disk_util: -1,
};

describe('case 1: padded strings', () => {
  it('a list and a show hand berth trimmed addresses, status and label', async () => {
    server.setHandler((q, res) =>
      q.url.startsWith('/api/v1/') ? json(res, 200, { instances: [padded], next_token: null }) : json(res, 200, { instances: padded }),
    );
    const [listed] = await client.listInstances();
    const shown = await client.showInstance(41);
    for (const inst of [listed!, shown!]) {
      expect(inst).toMatchObject({ label: 'berth:s:r:1', actual_status: 'running', ssh_host: 'ssh4.vast.ai', public_ipaddr: '127.0.0.1' });
      expect(inst.ports?.['22/tcp']?.[0]?.HostPort).toBe('40022');
    }
  });

  it('a search hands berth trimmed offer strings', async () => {
    server.setHandler((_q, res) =>
      json(res, 200, { offers: [{ id: 1, machine_id: 2, gpu_name: 'RTX 4090 \n', num_gpus: 1, gpu_ram: 24564, dph_total: 0.4 }] }),
    );
    expect((await client.searchOffers({}))[0]!.gpu_name).toBe('RTX 4090');
  });
});

describe('case 2: -1 means unknown', () => {
  it('gpu_util and disk_util of -1 reach berth as null', async () => {
    server.setHandler((_q, res) => json(res, 200, { instances: [padded], next_token: null }));
    const [inst] = await client.listInstances();
    expect(inst!.gpu_util).toBeNull();
    expect(inst!['disk_util']).toBeNull();
  });
});

describe('case 3: a pending bid answered 200 success:false with its new_contract', () => {
  it('is taken as the create: the instance it names is returned, not thrown away', async () => {
    server.setHandler((_q, res) => json(res, 200, { success: false, new_contract: 7835611, instance_api_key: 'ik-pending' }));
    const created = await client.createInstance(5, { image: 'i', disk: 20, label: 'berth:s:r:1', price: 0.2 });
    expect(created).toMatchObject({ instanceId: 7835611, instanceApiKey: 'ik-pending' });
    // The answer's failure goes with it: the caller decides (a bid is followed, on-demand destroyed).
    expect(created.unsuccessful).toMatch(/success: false/);
    expect(server.requests).toHaveLength(1);
  });

  it('an on-demand create answered success:false naming a stopped contract: returned with the service words, secrets scrubbed (dstack #4036)', async () => {
    server.setHandler((_q, res) =>
      json(res, 200, {
        success: false,
        new_contract: 7835612,
        error: 'resources_unavailable',
        msg: 'created stopped; env TOKEN=s3cret-env',
      }),
    );
    const created = await client.createInstance(5, { image: 'i', disk: 20, label: 'berth:s:r:1', env: { TOKEN: 's3cret-env' } });
    expect(created.instanceId).toBe(7835612);
    expect(created.unsuccessful).toMatch(/resources_unavailable/);
    expect(created.unsuccessful).not.toContain('s3cret-env');
    expect(server.requests).toHaveLength(1);
  });

  it('a plain success says nothing of failure', async () => {
    server.setHandler((_q, res) => json(res, 200, { success: true, new_contract: 7835613 }));
    const created = await client.createInstance(5, { image: 'i', disk: 20, label: 'berth:s:r:1' });
    expect(created).toEqual({ instanceId: 7835613 });
  });

  it('a success:false that names no instance is still ambiguous (looked for by label)', async () => {
    server.setHandler((_q, res) => json(res, 200, { success: false, error: 'request_failed', msg: 'x' }));
    await expect(client.createInstance(5, { image: 'i', disk: 20, label: 'berth:s:r:1' })).rejects.toBeInstanceOf(AmbiguousCreateError);
  });
});

describe('case 4: a bad key answered 404 with only msg "Invalid user key"', () => {
  it('on search fails at once as auth, not as not found', async () => {
    server.setHandler((_q, res) => json(res, 404, { msg: 'Invalid user key' }));
    const err = await client.searchOffers({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthError);
    expect(err).toMatchObject({ code: 'auth', status: 404, retryable: false });
    expect(server.requests).toHaveLength(1);
  });

  it('on a show does not read as "instance gone"', async () => {
    server.setHandler((_q, res) => json(res, 404, { success: false, msg: 'Invalid user key' }));
    await expect(client.showInstance(3)).rejects.toBeInstanceOf(AuthError);
  });

  it('a plain not-found stays not found', async () => {
    server.setHandler((_q, res) => json(res, 404, { success: false, error: 'no_such_instance', msg: 'Instance not found' }));
    expect(await client.showInstance(3)).toBeNull();
  });
});

describe('case 6: a logs 403 not_authorized', () => {
  it('is a refusal about the instance, not a permission the key lacks', async () => {
    server.setHandler((_q, res) => json(res, 403, { error: 'not_authorized', msg: 'Not authorized to view logs for this instance' }));
    const err = await client.requestLogs(3, { tail: 10 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceHttpError);
    expect(err).not.toBeInstanceOf(PermissionError);
    expect(err).toMatchObject({ code: 'bad_request', status: 403, serviceCode: 'not_authorized', retryable: false });
    expect((err as Error).message).toContain('not a permission of the key');
  });

  it('a 403 naming a permission category is still a missing permission', async () => {
    server.setHandler((_q, res) => json(res, 403, { error: 'not_authorized', msg: 'requires permission instance_read' }));
    const err = await client.requestLogs(3, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermissionError);
  });
});

describe('a destroy answered 400 invalid_args "invalid instance_id" (destroy_instance.yaml)', () => {
  const invalidId = { success: false, error: 'invalid_args', msg: 'invalid instance_id' };

  it('is "gone" when the service no longer shows the instance, so a run does not destroy it again forever', async () => {
    server.setHandler((q, res) => (q.method === 'DELETE' ? json(res, 400, invalidId) : json(res, 200, { instances: null })));
    expect(await client.destroyInstance(7)).toBe('gone');
    expect(server.requests.map((r) => `${r.method} ${r.url}`)).toEqual(['DELETE /api/v0/instances/7/', 'GET /api/v0/instances/7/']);
  });

  it('stays a refusal while the service still shows the instance', async () => {
    server.setHandler((q, res) => (q.method === 'DELETE' ? json(res, 400, invalidId) : json(res, 200, { instances: padded })));
    const err = await client.destroyInstance(41).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceHttpError);
    expect(err).toMatchObject({ status: 400, serviceCode: 'invalid_args' });
  });
});
