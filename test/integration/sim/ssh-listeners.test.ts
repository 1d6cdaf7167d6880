// Opt-in SSH listeners: while an instance runs, its proxy (ssh_host:ssh_port) and direct
// (public_ipaddr + ports["22/tcp"]) addresses are real loopback listeners that send an SSH banner;
// the ssh_* profiles refuse, close without a banner, hang, or answer late; nothing listens before
// running, after a stop or destroy, or after the simulator closes.
import { connect, createServer } from 'node:net';
import { afterAll, describe, expect, test } from 'vitest';
import type { FaultProfile, RunningSimulator, SimConfigInput } from '../../../src/sim/index.js';
import { call, startTestSim, waitFor } from './helpers.js';

const BANNER = 'SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.10\r\n';
const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

type Probe = { kind: 'refused' } | { kind: 'banner' | 'closed' | 'silent'; data: string };

/** Connects and reads for `ms`: a line, a close without data, silence, or a refusal. */
function probe(port: number, ms = 150): Promise<Probe> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let data = '';
    const done = (p: Probe) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(p);
    };
    const timer = setTimeout(() => done({ kind: 'silent', data }), ms);
    socket.on('data', (b) => {
      data += b.toString();
      if (data.includes('\n')) done({ kind: 'banner', data });
    });
    socket.on('end', () => done({ kind: 'closed', data }));
    socket.on('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED' ? { kind: 'refused' } : { kind: 'closed', data }));
  });
}

/** A simulator on a manual clock (time scale 1): an instance runs once the test moves time 300 s on. */
async function fresh(config: SimConfigInput = {}) {
  const clock = { now: 1_000_000 };
  const sim = await startTestSim({
    timeScale: 1,
    now: () => clock.now,
    config: {
      ssh_listeners: { enabled: true, late_s: 60 },
      lifecycle: { provision_s: 100, boot_s: { min: 200, max: 200 }, restart_s: 100 },
      ...config,
    },
  });
  sims.push(sim);
  return { sim, clock, record: async (id: number) => (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances };
}

/** An instance with direct SSH on an offer with direct ports; its record before and once running. */
async function runDirect({ sim, clock, record }: Awaited<ReturnType<typeof fresh>>, profile: FaultProfile = 'healthy') {
  const offer = (await call(sim, 'POST', '/api/v0/bundles/', { direct_port_count: { gte: 1 }, limit: 1 })).body.offers[0];
  sim.setOfferProfile(offer.id, profile);
  const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', runtype: 'ssh_direc ssh_proxy' })).body
    .new_contract as number;
  const before = await record(id);
  clock.now += 300_000;
  const rec = await record(id);
  expect(rec.actual_status).toBe('running');
  return { id, before, rec, proxy: rec.ssh_port as number, direct: Number(rec.ports['22/tcp'][0].HostPort) };
}

describe('SSH listeners', () => {
  test('a running instance answers with a banner at its proxy and its direct address, both on 127.0.0.1', async () => {
    const { before, rec, proxy, direct } = await runDirect(await fresh());
    expect(rec).toMatchObject({ ssh_host: '127.0.0.1', public_ipaddr: '127.0.0.1', direct_port_start: direct });
    expect(proxy).not.toBe(direct);
    expect(before).toMatchObject({ actual_status: null, ssh_host: '127.0.0.1', ssh_port: proxy });
    expect(await probe(proxy)).toEqual({ kind: 'banner', data: BANNER });
    expect(await probe(direct)).toEqual({ kind: 'banner', data: BANNER });
  });

  test("each connection sshd answered adds sshd's lines to the container log, after the task's output (issue #37)", async () => {
    const w = await fresh();
    const { id, proxy, direct } = await runDirect(w);
    const logText = async () => {
      const url = (await call(w.sim, 'PUT', `/api/v0/instances/request_logs/${id}/`, { tail: '20' })).body.result_url as string;
      w.clock.now += 5_000;
      return (await (await fetch(url)).text()).trimEnd().split('\n');
    };
    const before = await logText();
    expect(before.at(-1)).toBe('Server listening on 0.0.0.0 port 22.');
    expect((await probe(proxy)).kind).toBe('banner');
    expect((await probe(direct)).kind).toBe('banner');
    const lines = await waitFor(
      async () => {
        const got = await logText();
        return got.length >= before.length + 4 ? got : undefined;
      },
      2000,
      "sshd's lines",
    );
    expect(lines.slice(before.length)).toEqual([
      'error: kex_exchange_identification: Connection closed by remote host',
      expect.stringMatching(/^Connection closed by 127\.0\.0\.1 port \d+$/),
      'error: kex_exchange_identification: Connection closed by remote host',
      expect.stringMatching(/^Connection closed by 127\.0\.0\.1 port \d+$/),
    ]);
  });

  test('nothing listens before running, while stopped, or once destroyed; a start opens the same ports again', async () => {
    const w = await fresh();
    const { id, before, proxy, direct } = await runDirect(w);
    expect(before.actual_status).toBe(null);
    expect((await probe(proxy)).kind).toBe('banner');
    await call(w.sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' });
    expect(await probe(proxy)).toEqual({ kind: 'refused' });
    expect(await probe(direct)).toEqual({ kind: 'refused' });
    await call(w.sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' });
    expect((await w.record(id)).actual_status).toBe('loading');
    expect(await probe(proxy)).toEqual({ kind: 'refused' });
    w.clock.now += 100_000;
    expect((await w.record(id)).ssh_port).toBe(proxy);
    expect((await probe(proxy)).kind).toBe('banner');
    await call(w.sim, 'DELETE', `/api/v0/instances/${id}/`);
    expect(await probe(proxy)).toEqual({ kind: 'refused' });
  });

  test('a port taken while the instance was stopped is replaced by a new one, and the record shows it', async () => {
    const w = await fresh();
    const { id, proxy } = await runDirect(w);
    await call(w.sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' });
    const squatter = createServer((s) => s.end('not ssh\n'));
    await new Promise<void>((r) => squatter.listen(proxy, '127.0.0.1', r));
    try {
      await call(w.sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' });
      w.clock.now += 100_000;
      await w.record(id);
      const moved = await waitFor(
        async () => {
          const port = (await w.record(id)).ssh_port as number;
          return port !== proxy ? port : undefined;
        },
        2000,
        'a new port',
      );
      expect((await probe(moved)).kind).toBe('banner');
    } finally {
      await new Promise((r) => squatter.close(r));
    }
  });

  test('profiles: ssh_refused never listens, ssh_no_banner closes at once, ssh_hang says nothing', async () => {
    const w = await fresh();
    const refused = await runDirect(w, 'ssh_refused');
    expect(await probe(refused.proxy)).toEqual({ kind: 'refused' });
    expect(await probe(refused.direct)).toEqual({ kind: 'refused' });
    const noBanner = await runDirect(w, 'ssh_no_banner');
    expect(await probe(noBanner.proxy)).toEqual({ kind: 'closed', data: '' });
    const hang = await runDirect(w, 'ssh_hang');
    expect(await probe(hang.direct, 300)).toEqual({ kind: 'silent', data: '' });
  });

  test('ssh_late: closed without a banner until late_s sim seconds after running, then the banner', async () => {
    const w = await fresh();
    const late = await runDirect(w, 'ssh_late');
    expect(await probe(late.proxy)).toEqual({ kind: 'closed', data: '' });
    w.clock.now += 59_000;
    expect(await probe(late.direct)).toEqual({ kind: 'closed', data: '' });
    w.clock.now += 1_000;
    expect(await probe(late.proxy)).toEqual({ kind: 'banner', data: BANNER });
    expect(await probe(late.direct)).toEqual({ kind: 'banner', data: BANNER });
  });

  test('a held connection is closed after hold_ms; close() closes every listener and connection', async () => {
    const w = await fresh({ ssh_listeners: { enabled: true, hold_ms: 100 } });
    const { proxy } = await runDirect(w, 'ssh_hang');
    expect(await probe(proxy, 1000)).toEqual({ kind: 'closed', data: '' });
    const { direct } = await runDirect(w);
    const sim = w.sim;
    const open = connect({ host: '127.0.0.1', port: direct });
    const ended = new Promise((r) => open.on('close', r));
    open.on('error', () => undefined);
    await sim.close();
    await ended;
    expect(await probe(direct)).toEqual({ kind: 'refused' });
  });

  test('off by default: the proxy host is a name that never resolves', async () => {
    const sim = await startTestSim();
    sims.push(sim);
    const id = (await call(sim, 'PUT', `/api/v0/asks/${sim.offers()[0]!.id}/`, { image: 'x' })).body.new_contract;
    expect((await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances.ssh_host).toMatch(/^ssh\d\.vast-sim\.invalid$/);
  });
});
