// Reading a task's end from its log (issue #29): the log is read from its end whatever the line
// lengths, and a log read that waits long for its rate token is not a failed read. Fake clock; the
// upload is served by a real local HTTP server where the fetch itself is under test.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchWithoutCredentials, type FetchedText } from '../../../../src/daemon/task-end/failure-logs.js';
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

function taskLogs(opts: { clock: FakeClock; requestMs?: number; fetchText?: (url: string, signal: AbortSignal) => Promise<FetchedText> }) {
  const kept: string[] = [];
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
      requestLogs: async (_id, _request, options) => {
        if (opts.requestMs) await opts.clock.sleep(opts.requestMs, options?.signal);
        return { resultUrl: url };
      },
    },
    ...(opts.fetchText ? { fetchText: opts.fetchText } : {}),
  });
  return { logs, kept };
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
    expect(await logs.readEnd({ runId: RUN, n: 1, instanceId: 7 }, AbortSignal.timeout(10_000))).toMatchObject({
      exitCode: 0,
      onstart: false,
    });
    const log = await logs.readLog({ runId: RUN, n: 1, instanceId: 7 }, 200, AbortSignal.timeout(10_000));
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
    expect(await reading).toMatchObject({ exitCode: 0, at: clock.now() });
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
});
