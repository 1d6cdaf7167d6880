// The cloud destination of a task's outputs (issue #40 item 4), against a mocked client on the fake
// clock: the instance is stopped before the copy, the connection found by name or id, the copy's end
// read from the status bar (an old "Finished" not trusted before the bar's delay), and every end
// recorded in the store's row.
import { describe, expect, it } from 'vitest';
import type { CollectInput } from '../../../../machines/run-machine.js';
import { OutputsCloud, type CloudCopyPort } from '../../../../src/daemon/task-files/outputs-cloud.js';
import type { OutputsPlan, RunPlan } from '../../../../src/job-spec/run-plan.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const FINISHED = 'Cloud Copy Operation Finished';

function world(opts: { connection?: string | number; bar?: Array<string | null>; stopFails?: boolean } = {}) {
  const clock = new FakeClock();
  const calls: string[] = [];
  const rows: Array<{ kind: string; state: string; detail: string | null }> = [];
  const bar = [...(opts.bar ?? ['Cloud Copy Operation Started', FINISHED])];
  const collect: OutputsPlan = { paths: ['/root/workdir/out'], cloud: { connection: opts.connection ?? 'my-s3', path: 'bucket/run1' } };
  const port: CloudCopyPort = {
    async setInstanceState(id, state) {
      calls.push(`state ${id} ${state}`);
      if (opts.stopFails) throw Object.assign(new Error('503 from the service'), { code: 'server_error' });
    },
    async listCloudConnections() {
      calls.push('list');
      return [
        { id: 7, name: 'my-s3' },
        { id: 9, name: 'other' },
      ];
    },
    async startCloudCopy(r) {
      calls.push(`copy ${r.instanceId} ${r.src} -> ${r.connectionId}:${r.dst} (${r.transfer})`);
    },
    async statusMsg() {
      calls.push('look');
      return bar.length > 1 ? bar.shift()! : bar[0];
    },
    finished: (m) => m === FINISHED,
    failed: (m) => typeof m === 'string' && m.startsWith('Cloud Copy Operation Failed'),
  };
  const cloud = new OutputsCloud({
    store: {
      outputs: {
        begin: (o: { state: string; detail: string | null }) => rows.push({ kind: 'begin', state: o.state, detail: o.detail }),
        finish: (o: { state: string; detail: string | null }) => rows.push({ kind: 'finish', state: o.state, detail: o.detail }),
      } as never,
      transaction: <T>(fn: () => T) => fn(),
    },
    clock,
    specs: { get: () => ({ collect }) as RunPlan } as never,
    cloud: port,
    ownership: { check: () => undefined },
    lookEveryMs: 5_000,
    host: 'box1',
  });
  return { clock, calls, rows, cloud };
}

const input: CollectInput = { runId: 'r1', n: 1, instanceId: 42, until: Number.MAX_SAFE_INTEGER, stopped: false };

describe('outputs to a cloud connection', () => {
  it('stops the instance, then copies its one path to the connection named, and ends when the bar says finished', async () => {
    const w = world();
    const done = w.cloud.collect(input, new AbortController().signal);
    await w.clock.advance(60_000);
    await expect(done).resolves.toMatchObject({ state: 'copied', detail: 'my-s3 (id 7): bucket/run1' });
    // The stop comes first: the GPU stops billing before the copy runs.
    expect(w.calls.slice(0, 3)).toEqual(['state 42 stopped', 'list', 'copy 42 /root/workdir/out -> 7:bucket/run1 (Instance To Cloud)']);
    expect(w.rows).toEqual([
      { kind: 'begin', state: 'copying', detail: 'connection "my-s3", bucket/run1' },
      { kind: 'finish', state: 'copied', detail: 'my-s3 (id 7): bucket/run1' },
    ]);
  });

  it('finds the connection by its id too', async () => {
    const w = world({ connection: 9 });
    const done = w.cloud.collect(input, new AbortController().signal);
    await w.clock.advance(60_000);
    await expect(done).resolves.toMatchObject({ state: 'copied', detail: 'other (id 9): bucket/run1' });
  });

  it('does not stop an instance its task already stopped', async () => {
    const w = world();
    const done = w.cloud.collect({ ...input, stopped: true }, new AbortController().signal);
    await w.clock.advance(60_000);
    await done;
    expect(w.calls.filter((c) => c.startsWith('state'))).toEqual([]);
  });

  it('does not trust a "Finished" left in the bar by an earlier copy before the bar\'s delay has passed', async () => {
    // The bar says "Finished" from the start (an old copy's) and never anything else.
    const w = world({ bar: [FINISHED] });
    let settled = false;
    const done = w.cloud.collect(input, new AbortController().signal).then((r) => ((settled = true), r));
    await w.clock.advance(25_000);
    expect(settled).toBe(false);
    await w.clock.advance(10_000);
    await expect(done).resolves.toMatchObject({ state: 'copied' });
  });

  it('a connection the account does not have: failed, naming those it has, and no copy sent', async () => {
    const w = world({ connection: 'nope' });
    const out = await w.cloud.collect(input, new AbortController().signal);
    expect(out).toMatchObject({
      state: 'failed',
      detail: expect.stringMatching(/no cloud connection "nope".*my-s3 \(id 7\), other \(id 9\)/),
    });
    expect(w.calls.some((c) => c.startsWith('copy'))).toBe(false);
  });

  it('a copy the bar says failed ends failed with its words', async () => {
    const w = world({ bar: ['Cloud Copy Operation Started', 'Cloud Copy Operation Failed: rclone exited 1'] });
    const done = w.cloud.collect(input, new AbortController().signal);
    await w.clock.advance(60_000);
    await expect(done).resolves.toMatchObject({
      state: 'failed',
      detail: expect.stringMatching(/failed: Cloud Copy Operation Failed: rclone exited 1/),
    });
  });

  it('a copy that never ends is stopped by the machine (its abort): the row says so and the actor rejects', async () => {
    const w = world({ bar: ['Cloud Copy Operation Started'] });
    const stop = new AbortController();
    const done = w.cloud.collect(input, stop.signal);
    const rejected = expect(done).rejects.toBeDefined();
    await w.clock.advance(600_000);
    stop.abort();
    await rejected;
    expect(w.rows.at(-1)).toMatchObject({ kind: 'finish', state: 'failed', detail: expect.stringMatching(/stopped before it finished/) });
  });

  it('a stop the service refuses is no copy: failed with the reason, for the machine to destroy', async () => {
    const w = world({ stopFails: true });
    const out = await w.cloud.collect(input, new AbortController().signal);
    expect(out).toMatchObject({ state: 'failed', detail: expect.stringMatching(/503/) });
    expect(w.calls.some((c) => c.startsWith('copy'))).toBe(false);
  });
});
