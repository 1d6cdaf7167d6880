import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Endpoint } from '../../../../machines/run-types.js';
import { answersSsh, probeUntilReachable } from '../../../../src/daemon/runs/ssh-probe.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const servers: Server[] = [];
const sockets = new Set<Socket>();

async function tcpServer(onConnection: (s: Socket) => void): Promise<Endpoint> {
  const server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    onConnection(s);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { kind: 'proxy', host: '127.0.0.1', port: (server.address() as AddressInfo).port };
}

/** A port nothing listens on (taken, then freed). */
async function closedPort(): Promise<Endpoint> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return { kind: 'direct', host: '127.0.0.1', port };
}

afterEach(async () => {
  for (const s of sockets) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
});

const FAST = { connectTimeoutMs: 1_000, bannerTimeoutMs: 300 };

describe('ssh probe: one try', () => {
  it('answers true for an SSH-2.0 identification line, also after other lines', async () => {
    const plain = await tcpServer((s) => s.write('SSH-2.0-OpenSSH_9.6p1 Ubuntu-3\r\n'));
    const chatty = await tcpServer((s) => s.write('Welcome to the box\r\nSSH-2.0-dropbear_2022.83\r\n'));
    expect(await answersSsh(plain, FAST)).toBe(true);
    expect(await answersSsh(chatty, FAST)).toBe(true);
  });

  it('answers false for a refused port, a silent listener, a non-SSH banner, and a close without a banner', async () => {
    const silent = await tcpServer(() => undefined);
    const http = await tcpServer((s) => s.end('HTTP/1.1 400 Bad Request\r\n\r\n'));
    const closes = await tcpServer((s) => s.destroy());
    expect(await answersSsh(await closedPort(), FAST)).toBe(false);
    expect(await answersSsh(silent, FAST)).toBe(false);
    expect(await answersSsh(http, FAST)).toBe(false);
    expect(await answersSsh(closes, FAST)).toBe(false);
  });

  it('gives up at once when aborted', async () => {
    const silent = await tcpServer(() => undefined);
    const ctrl = new AbortController();
    const tried = answersSsh(silent, { connectTimeoutMs: 60_000, bannerTimeoutMs: 60_000 }, ctrl.signal);
    ctrl.abort();
    expect(await tried).toBe(false);
  });
});

describe('ssh probe: until reachable', () => {
  const proxy: Endpoint = { kind: 'proxy', host: 'ssh5.example', port: 10600 };
  const direct: Endpoint = { kind: 'direct', host: '203.0.113.7', port: 41022 };
  const TIMINGS = { connectTimeoutMs: 5_000, bannerTimeoutMs: 5_000, firstPauseMs: 1_000, maxPauseMs: 2_000 };

  it('tries one endpoint at a time, pauses between rounds (growing to the maximum), and reports every endpoint that answers', async () => {
    const clock = new FakeClock();
    const tries: Array<{ at: number; port: number }> = [];
    let inFlight = 0;
    let maxInFlight = 0;
    const start = clock.now();
    const answersAt = start + 3_500;
    const tryEndpoint = async (e: Endpoint) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      tries.push({ at: clock.now() - start, port: e.port });
      await Promise.resolve();
      inFlight--;
      return clock.now() >= answersAt;
    };
    const ctrl = new AbortController();
    let result: Endpoint[] | undefined;
    void probeUntilReachable([proxy, direct], clock, ctrl.signal, TIMINGS, tryEndpoint).then((r) => (result = r));
    await clock.advance(10_000);
    expect(result).toEqual([proxy, direct]);
    // Rounds at 0, 1 s, 2.5 s (pause 1.5 s), 4.5 s (pause capped at 2 s): the last round answers.
    expect(tries.map((t) => t.at)).toEqual([0, 0, 1_000, 1_000, 2_500, 2_500, 4_500, 4_500]);
    expect(maxInFlight).toBe(1);
  });

  it('reports only the endpoints that answer', async () => {
    const clock = new FakeClock();
    const out = await probeUntilReachable([proxy, direct], clock, new AbortController().signal, TIMINGS, async (e) => e.kind === 'direct');
    expect(out).toEqual([direct]);
  });

  it('keeps waiting while the record shows no endpoint yet, and stops when aborted', async () => {
    const clock = new FakeClock();
    const ctrl = new AbortController();
    const probe = probeUntilReachable([], clock, ctrl.signal, TIMINGS, async () => true);
    await clock.advance(60_000);
    ctrl.abort();
    await expect(probe).rejects.toMatchObject({ code: 'aborted' });
  });
});
