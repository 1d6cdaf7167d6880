// Reading a task's end from its log (issue #29): the log is read from its end whatever the line
// lengths, and a log read that waits long for its rate token is not a failed read. Issue #37: the
// upload is read as the official client reads it (any answer but 200 is "not yet"), the marker is
// asked for by itself (`filter`), docker's "No such container" is no output, and the log of an
// instance its task stopped is read for minutes. Fake clock; the upload is served by a real local
// HTTP server where the fetch itself is under test.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchWithoutCredentials, type FetchedText } from '../../../../src/daemon/task-end/log-upload.js';
import { LogSecrets } from '../../../../src/daemon/task-end/log-secrets.js';
import { TaskLogs } from '../../../../src/daemon/task-end/task-logs.js';
import { silentLogger } from '../../../../src/logger.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const RUN = 'abcdefgh2345';
const MARKER = `berth-task-end run=${RUN} attempt=1 exit=0`;
/** 200 lines of 6 KB (progress bars, printed tensors), then the wrapper's marker. */
const CHATTY = `${Array.from({ length: 200 }, (_, i) => `step ${i} ${'#'.repeat(6000)}`).join('\n')}\n${MARKER}\n`;

let server: Server;
let url: string;
beforeAll(async () => {
  server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(CHATTY));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/log`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** Awaits `work`, moving the fake clock only while the code under test waits on it. */
async function drive<T>(clock: FakeClock, work: Promise<T>): Promise<T> {
  let settled = false;
  const out = work.finally(() => (settled = true));
  while (!settled) {
    if (clock.pending > 0) await clock.advance(100);
    else await new Promise((r) => setImmediate(r));
  }
  return out;
}

type LogRequest = { tail?: number; filter?: string };

function taskLogs(opts: {
  clock: FakeClock;
  requestMs?: number;
  fetchText?: (url: string, signal: AbortSignal) => Promise<FetchedText>;
  /** The URL each request is answered with (default: the local server's). */
  urlFor?: (request: LogRequest) => string;
}) {
  const kept: string[] = [];
  const requests: LogRequest[] = [];
  const logs = new TaskLogs({
    clock: opts.clock,
    log: silentLogger(),
    journal: { logTail: (_r, _n, text) => kept.push(text) },
    secrets: new LogSecrets({
      log: silentLogger(),
      apiKey: 'k'.repeat(20),
      keys: { put: () => undefined, get: () => undefined },
      specs: { get: () => undefined },
      runs: { get: () => undefined },
    }),
    client: {
      // A request queued behind others for its rate token: answered after requestMs.
      requestLogs: async (_id, request, options) => {
        requests.push(request);
        if (opts.requestMs) await opts.clock.sleep(opts.requestMs, options?.signal);
        return { resultUrl: opts.urlFor ? opts.urlFor(request) : url };
      },
    },
    ...(opts.fetchText ? { fetchText: opts.fetchText } : {}),
  });
  return { logs, kept, requests };
}

describe('task logs (issue #29)', () => {
  it('keeps the end of an upload longer than what is read: the marker after 1.2 MB of output is found', async () => {
    const got = await fetchWithoutCredentials(url, AbortSignal.timeout(10_000));
    expect(got.status).toBe(200);
    expect(got.cut).toBe(true);
    expect(got.text.endsWith(`${MARKER}\n`)).toBe(true);
    expect(Buffer.byteLength(got.text)).toBeLessThanOrEqual(1024 * 1024);

    const clock = new FakeClock();
    const { logs } = taskLogs({ clock });
    expect(await drive(clock, logs.readEnd({ runId: RUN, n: 1, instanceId: 7 }, AbortSignal.timeout(10_000)))).toMatchObject({
      exitCode: 0,
      onstart: false,
    });
    const log = await drive(clock, logs.readLog({ runId: RUN, n: 1, instanceId: 7 }, 200, AbortSignal.timeout(10_000)));
    expect(log?.cut).toBe(true);
    // The partial first line is dropped: every line shown is whole.
    expect(log!.text.split('\n')[0]).toMatch(/^step \d+ #{6000}$/);
  });

  it('a log read that waits five minutes for its rate token still reads the end', async () => {
    const clock = new FakeClock();
    const { logs } = taskLogs({
      clock,
      requestMs: 5 * 60_000,
      fetchText: async () => ({ status: 200, text: `work\n${MARKER}\n` }),
    });
    const reading = logs.readEnd({ runId: RUN, n: 1, instanceId: 7 }, AbortSignal.timeout(10_000));
    await clock.advance(5 * 60_000);
    expect(await drive(clock, reading)).toMatchObject({ exitCode: 0 });
  });

  it('at a run’s limit with the GPU maybe billing, gives up within its bound, however long the token would take', async () => {
    const clock = new FakeClock();
    const { logs } = taskLogs({ clock, requestMs: 5 * 60_000, fetchText: async () => ({ status: 200, text: `${MARKER}\n` }) });
    let done: unknown;
    void logs.readEnd({ runId: RUN, n: 1, instanceId: 7, withinMs: 30_000 }, AbortSignal.timeout(10_000)).then((r) => (done = r));
    await clock.advance(29_999);
    expect(done).toBeUndefined();
    await clock.advance(1);
    expect(done).toEqual({ exitCode: null, at: clock.now() });
  });

  it('an upload answering 403 AccessDenied for 1.5 s is "not yet": the end is read and the output kept, first try', async () => {
    const clock = new FakeClock();
    const writtenAt = clock.now() + 1_500;
    const { logs, kept, requests } = taskLogs({
      clock,
      // As S3 answers a key-less object before it is written (service-facts.md, 2026-11-27).
      fetchText: async () =>
        clock.now() < writtenAt
          ? { status: 403, text: '<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>' }
          : { status: 200, text: `epoch 1 done\n${MARKER}\n` },
    });
    expect(await drive(clock, logs.readEnd({ runId: RUN, n: 1, instanceId: 7 }, AbortSignal.timeout(10_000)))).toMatchObject({
      exitCode: 0,
    });
    expect(requests).toHaveLength(2);
    expect(kept).toEqual([`epoch 1 done\n${MARKER}`]);
  });

  it('asks the host for the marker by itself (filter): an onstart service logging after it cannot push it out of the tail', async () => {
    const clock = new FakeClock();
    // The task ended, then a service started with `&` logged 10,000 lines (50 a second for 200 s).
    const log = ['training', MARKER, ...Array.from({ length: 10_000 }, (_, i) => `GET /health ${i}`)];
    const served = new Map<string, string>();
    const { logs, requests } = taskLogs({
      clock,
      // The host's grep after its tail, the strictest order (logs.yaml: "Grep filter to apply to log entries").
      urlFor: (request) => {
        const lines = log.slice(-(request.tail ?? 1000)).filter((l) => request.filter === undefined || l.includes(request.filter));
        const at = `https://s3.example/${served.size}.log`;
        served.set(at, `${lines.join('\n')}\n`);
        return at;
      },
      fetchText: async (at) => ({ status: 200, text: served.get(at)! }),
    });
    expect(await drive(clock, logs.readEnd({ runId: RUN, n: 1, instanceId: 7 }, AbortSignal.timeout(10_000)))).toMatchObject({
      exitCode: 0,
    });
    // The marker's request is a grep (a tiny answer), with a tail as logs.yaml types it; then the output.
    expect(requests[0]).toEqual({ tail: 100_000, filter: 'berth-task-end' });
    expect(requests[1]).toEqual({ tail: 200 });
  });

  it('"No such container" is neither output nor an end: the read says nothing could be read, and keeps nothing', async () => {
    const clock = new FakeClock();
    const { logs, kept, requests } = taskLogs({
      clock,
      fetchText: async () => ({ status: 200, text: 'Error response from daemon: No such container: C.7\n' }),
    });
    const end = await drive(clock, logs.readEnd({ runId: RUN, n: 1, instanceId: 7 }, AbortSignal.timeout(10_000)));
    expect(end).toMatchObject({ exitCode: null, unread: true });
    expect(requests).toHaveLength(3);
    expect(kept).toEqual([]);
    const shown = await drive(clock, logs.readLog({ runId: RUN, n: 1, instanceId: 7 }, 50, AbortSignal.timeout(10_000)));
    expect(shown?.text).not.toMatch(/No such container/);
  });

  it('a read of an instance that may still bill more than its disk gives up after three requests (bounded)', async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const { logs, requests } = taskLogs({
      clock,
      fetchText: async () => ({ status: 403, text: '<Error><Code>AccessDenied</Code></Error>' }),
    });
    const end = await drive(clock, logs.readEnd({ runId: RUN, n: 1, instanceId: 7 }, AbortSignal.timeout(10_000)));
    expect(end).toMatchObject({ exitCode: null, unread: true });
    expect(requests).toHaveLength(3);
    // Three upload windows of 30 s and two pauses of 5 s (docs/tasks.md).
    expect(end.at - start).toBeLessThanOrEqual(3 * 30_000 + 2 * 5_000);
  });

  it('the log of an instance its task stopped is read for minutes: no upload for 5 minutes, then the end is read', async () => {
    const clock = new FakeClock();
    const writtenAt = clock.now() + 5 * 60_000;
    const { logs, kept } = taskLogs({
      clock,
      fetchText: async () =>
        clock.now() < writtenAt ? { status: 403, text: '<Error><Code>AccessDenied</Code></Error>' } : { status: 200, text: `${MARKER}\n` },
    });
    const end = await drive(clock, logs.readEnd({ runId: RUN, n: 1, instanceId: 7, stoppedByTask: true }, AbortSignal.timeout(10_000)));
    expect(end).toMatchObject({ exitCode: 0 });
    expect(end.unread).toBeUndefined();
    expect(kept).toEqual([MARKER]);
  });

  it('gives up on the log of an instance its task stopped after 15 minutes, saying it could not be read', async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const { logs } = taskLogs({ clock, fetchText: async () => ({ status: 403, text: '' }) });
    const end = await drive(clock, logs.readEnd({ runId: RUN, n: 1, instanceId: 7, stoppedByTask: true }, AbortSignal.timeout(10_000)));
    expect(end).toMatchObject({ exitCode: null, unread: true });
    expect(end.at - start).toBeGreaterThan(10 * 60_000);
    expect(end.at - start).toBeLessThanOrEqual(15 * 60_000 + 30_000);
  });
});
