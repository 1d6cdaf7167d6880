// Instance logs as logs.yaml documents them: PUT request_logs/{id} answers {success, result_url, msg};
// the URL, served by the simulator without a key like a key-less S3 object, is 403 AccessDenied
// until the upload lands (as users measured: service-facts.md, "Added 2026-11-27"), then holds the
// container log (tail, then filter), and expires. Before the container exists and after a destroy
// the log is docker's "No such container"; each SSH connection adds sshd's lines.
import { afterAll, describe, expect, test } from 'vitest';
import type { FaultProfile, RunningSimulator, SimConfigInput } from '../../../src/sim/index.js';
import { call, startTestSim, waitFor } from './helpers.js';

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

/** Manual clock at time scale 1: an instance is running 30 s after its create. */
async function fresh(config: SimConfigInput = {}) {
  const clock = { now: 1_000_000 };
  const sim = await startTestSim({
    timeScale: 1,
    now: () => clock.now,
    config: {
      lifecycle: { provision_s: 10, boot_s: { min: 20, max: 20 }, fail_after_s: 20 },
      logs: { upload_delay_s: 2, url_ttl_s: 600 },
      keys: [{ key: 'search-only-key-01', permissions: { api: { misc: {} } } }],
      ...config,
    },
  });
  sims.push(sim);
  const create = async (profile: FaultProfile = 'healthy', body: Record<string, unknown> = {}) => {
    const offer = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })).body.offers[0];
    sim.setOfferProfile(offer.id, profile);
    return (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'pytorch/pytorch:2.3-cuda12', ...body })).body
      .new_contract as number;
  };
  const logs = (id: number, body?: unknown) => call(sim, 'PUT', `/api/v0/instances/request_logs/${id}`, body);
  /** Requests logs and fetches them once the upload has landed. */
  const text = async (id: number, body?: unknown) => {
    const url = (await logs(id, body)).body.result_url as string;
    clock.now += 2_000;
    const res = await fetch(url);
    expect(res.status).toBe(200);
    return (await res.text()).split('\n').filter((l) => l !== '');
  };
  return { sim, clock, create, logs, text };
}

describe('request_logs', () => {
  test('answers a result_url that is 403 (S3 AccessDenied) until the upload lands, then the log, needing no key; it expires', async () => {
    const { sim, clock, create, logs } = await fresh();
    const id = await create();
    clock.now += 30_000;
    const r = await logs(id);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      success: true,
      result_url: expect.stringMatching(new RegExp(`^${sim.url}/_logs/[0-9a-f]{48}\\.log$`)),
      msg: expect.any(String),
    });
    const early = await fetch(r.body.result_url);
    expect(early.status).toBe(403);
    expect(await early.text()).toContain('<Code>AccessDenied</Code>');
    clock.now += 1_999;
    expect((await fetch(r.body.result_url)).status).toBe(403);
    clock.now += 1;
    const got = await fetch(r.body.result_url);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toContain('text/plain');
    expect((await got.text()).split('\n')).toEqual([
      '2.3-cuda12: Pulling from pytorch/pytorch',
      expect.stringMatching(/^Digest: sha256:[0-9a-f]{64}$/),
      'Status: Downloaded newer image for pytorch/pytorch:2.3-cuda12',
      `Container C.${id} started`,
      'Server listening on 0.0.0.0 port 22.',
      '',
    ]);
    expect((await logs(id)).body.result_url).not.toBe(r.body.result_url);
    clock.now += 600_000;
    const expired = await fetch(r.body.result_url);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toContain('Request has expired');
    expect((await fetch(`${sim.url}/_logs/${'0'.repeat(48)}.log`)).status).toBe(403);
  });

  test('tail is applied first, then filter (a regular expression); the snapshot is the log at the request', async () => {
    const { clock, create, text } = await fresh();
    const id = await create();
    clock.now += 30_000;
    expect(await text(id, { tail: '2' })).toEqual([`Container C.${id} started`, 'Server listening on 0.0.0.0 port 22.']);
    expect(await text(id, { filter: 'Pull|Downloaded' })).toEqual([
      '2.3-cuda12: Pulling from pytorch/pytorch',
      'Status: Downloaded newer image for pytorch/pytorch:2.3-cuda12',
    ]);
    expect(await text(id, { tail: '2', filter: 'Pull' })).toEqual([]);
    expect(await text(id, { tail: '0' })).toEqual([]);
  });

  test('a failed container says why: the OCI error, the exit code; a stop, a start and a reboot are logged', async () => {
    const { sim, clock, create, text } = await fresh();
    const oci = await create('oci_failed');
    const exited = await create('exited');
    const stopped = await create();
    clock.now += 40_000;
    expect((await text(oci)).at(-1)).toMatch(/^docker: Error response from daemon: .*OCI runtime create failed/);
    expect((await text(exited)).at(-1)).toBe(`Container C.${exited} exited with code 1`);
    await call(sim, 'PUT', `/api/v0/instances/${stopped}/`, { state: 'stopped' });
    expect(await text(stopped, { tail: '1' })).toEqual([`Container C.${stopped} stopped`]);
    await call(sim, 'PUT', `/api/v0/instances/${stopped}/`, { state: 'running' });
    clock.now += 20_000;
    await call(sim, 'PUT', `/api/v0/instances/reboot/${stopped}/`, {});
    expect(await text(stopped, { tail: '4' })).toEqual([
      `Container C.${stopped} stopped`,
      `Container C.${stopped} started`,
      'Server listening on 0.0.0.0 port 22.',
      `Container C.${stopped} restarting`,
    ]);
  });

  test('an offline host never uploads: the URL stays 403', async () => {
    const { clock, create, logs } = await fresh();
    const id = await create('offline');
    clock.now += 40_000;
    const url = (await logs(id)).body.result_url;
    clock.now += 60_000;
    expect((await fetch(url)).status).toBe(403);
  });

  test('before its container exists and after a destroy, the log is docker\'s "No such container" alone', async () => {
    const { sim, clock, create, text } = await fresh();
    const id = await create();
    clock.now += 12_000; // loading: no container yet
    expect(await text(id)).toEqual([`Error response from daemon: No such container: C.${id}`]);
    expect(await text(id, { filter: 'berth-task-end' })).toEqual([]);
    clock.now += 30_000;
    expect((await text(id)).at(-2)).toBe(`Container C.${id} started`);
    await call(sim, 'DELETE', `/api/v0/instances/${id}/`);
    expect(await text(id)).toEqual([`Error response from daemon: No such container: C.${id}`]);
  });

  test('daemon_logs "true" gives the host daemon lines instead', async () => {
    const { clock, create, text } = await fresh();
    const id = await create();
    clock.now += 30_000;
    const lines = await text(id, { daemon_logs: 'true' });
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\dT.* instance ${id}: provisioning$`));
    expect(lines[2]).toContain(`instance ${id}: running (success, running)`);
  });

  test('errors: unknown ids are the documented 404; bad tail, filter or daemon_logs 400; instance_read is needed', async () => {
    const { sim, create, logs } = await fresh();
    expect(await logs(1)).toMatchObject({ status: 404, body: { error: 'invalid_id', msg: 'Invalid instance id.' } });
    const id = await create();
    // A number of lines as a number too, as the official client sends it (machines.py: tail=1000).
    expect((await logs(id, { tail: 5 })).status).toBe(200);
    for (const body of [{ tail: -1 }, { tail: 1.5 }, { tail: 'many' }, { filter: '(' }, { daemon_logs: true }]) {
      expect((await logs(id, body)).body.error, JSON.stringify(body)).toBe('invalid_args');
    }
    const denied = await call(sim, 'PUT', `/api/v0/instances/request_logs/${id}/`, {}, 'search-only-key-01');
    expect([denied.status, denied.body.permission]).toEqual([403, 'instance_read']);
  });
});

describe('request_logs with onstart execution', () => {
  test("the onstart script's stdout and stderr follow the container's start", async () => {
    const sim = await startTestSim({
      config: { lifecycle: { provision_s: 1, boot_s: { min: 5, max: 5 } }, onstart_exec: { enabled: true }, logs: { upload_delay_s: 0 } },
    });
    sims.push(sim);
    const offer = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })).body.offers[0];
    const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', onstart: 'echo hello; echo oops >&2; echo bye' })).body
      .new_contract;
    await waitFor(() => sim.history().find((h) => h.id === id)?.onstart ?? undefined, 5000, 'onstart to end');
    const url = (await call(sim, 'PUT', `/api/v0/instances/request_logs/${id}/`, { tail: '5' })).body.result_url;
    const lines = (await (await fetch(url)).text()).trimEnd().split('\n');
    expect(lines.slice(0, 2)).toEqual([`Container C.${id} started`, 'Server listening on 0.0.0.0 port 22.']);
    // stdout and stderr are two pipes: their relative order is not fixed, stdout's own order is.
    expect([...lines.slice(2)].sort()).toEqual(['bye', 'hello', 'oops']);
    expect(lines.indexOf('hello')).toBeLessThan(lines.indexOf('bye'));
  });
});
