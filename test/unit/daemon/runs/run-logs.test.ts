// A run's log while its task is followed over SSH (issue #39): read from what the follower kept,
// with no call to the service's logs endpoint; once the follow stops, from the service again.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { RunLogs } from '../../../../src/daemon/runs/run-logs.js';
import { openStore, type Store } from '../../../../src/store/index.js';

let store: Store;
let home: string;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'berth-run-logs-'));
  store = openStore({ home });
  store.transaction(() => {
    store.runs.insert({ id: 'r1', name: 'r1', specJson: '{}', createdAt: 1 });
    store.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 101, machineId: 1, dphTotal: 0.5, label: 'l-r1-1', at: 2 });
    store.attempts.adopt('r1', 1, 501, 3);
  });
});
afterEach(() => {
  store.close();
  rmSync(home, { recursive: true, force: true });
});

/** The run logs over the store, the follower's state as `follow` says now; `asked`: the logs-endpoint calls. */
function logsWith(instanceId: number, follow: () => { streaming: boolean; followed: boolean }) {
  const asked: unknown[] = [];
  const logs = new RunLogs({
    store,
    taskLogs: {
      readLog: async (at) => {
        asked.push(at);
        return { text: 'from the service', cut: false };
      },
    },
    instanceOf: () => instanceId,
    streaming: () => follow().streaming,
    followed: () => follow().followed,
  });
  return { logs, asked };
}

it("a followed task's log is the lines its follower kept, without a logs-endpoint call; after the follow, the service's", async () => {
  let followed = true;
  const { logs, asked } = logsWith(501, () => ({ streaming: followed, followed }));
  store.transaction(() => store.attempts.setFollowed('r1', 1, 14, 'one\ntwo\nthree'));
  expect(await logs.logsOf('r1', 2, AbortSignal.timeout(5000))).toEqual({
    instance_id: 501,
    source: 'live',
    text: 'two\nthree',
    cut: true,
    // The live output goes on from the byte after what was kept (the event stream's `output`).
    stream: { n: 1, offset: 14 },
  });
  expect(asked).toEqual([]);
  followed = false;
  expect(await logs.logsOf('r1', 2, AbortSignal.timeout(5000))).toMatchObject({ text: 'from the service', stream: null });
  expect(asked).toEqual([{ runId: 'r1', n: 1, instanceId: 501 }]);
});

it('a task whose follow read its end: its log is what was kept, with no logs-endpoint call while its instance goes', async () => {
  const { logs, asked } = logsWith(502, () => ({ streaming: false, followed: false }));
  store.transaction(() => {
    store.runs.insert({ id: 'abc', name: 'abc', specJson: '{}', createdAt: 1 });
    store.attempts.beginCreate({ runId: 'abc', n: 1, offerId: 102, machineId: 2, dphTotal: 0.5, label: 'l-abc-1', at: 2 });
    store.attempts.adopt('abc', 1, 502, 3);
    store.attempts.setFollowed('abc', 1, 4, 'one\n\nberth-task-end run=abc attempt=1 exit=0');
  });
  expect(await logs.logsOf('abc', 10, AbortSignal.timeout(5000))).toMatchObject({
    text: 'one\n\nberth-task-end run=abc attempt=1 exit=0',
    stream: null,
  });
  expect(asked).toEqual([]);
});

it('a followed task between the end its watch saw and its last bytes kept: what was kept, no stream, no logs-endpoint call', async () => {
  // Logged in, its stream stopped (caught up, or for the drain).
  const { logs, asked } = logsWith(501, () => ({ streaming: false, followed: true }));
  store.transaction(() => store.attempts.setFollowed('r1', 1, 14, 'one\ntwo\nthree'));
  expect(await logs.logsOf('r1', 5, AbortSignal.timeout(5000))).toEqual({
    instance_id: 501,
    source: 'live',
    text: 'one\ntwo\nthree',
    cut: false,
    stream: null,
  });
  expect(asked).toEqual([]);
});
