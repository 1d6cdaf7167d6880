// The run object's GPU, on a real SQLite store: what the spec asks for until an attempt's create is
// sent, then the GPU that attempt's offer rents; every attempt shows its own.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadRunView } from '../../../../src/daemon/control/run-view.js';
import { openStore, type Store } from '../../../../src/store/index.js';

let dir: string;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-run-view-'));
  store = openStore({ home: dir });
  const spec = { name: 'a', image: 'img', search: { filters: { gpu_name: { in: ['RTX 4090', 'A100'] } } } };
  store.runs.insert({ id: 'r1', name: 'a', specJson: JSON.stringify(spec), createdAt: 1 });
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const begin = (n: number, gpu: { name: string; count: number } | null) =>
  store.attempts.beginCreate({ runId: 'r1', n, offerId: n, machineId: n, dphTotal: 1, label: `berth:x:r1:${n}`, at: n, gpu });
const view = () => loadRunView(store, 'r1', 10)!;

describe('run view: the GPU', () => {
  it('is what the spec asks for until an attempt is made, and an attempt whose offer was gone rents nothing', () => {
    expect(view()).toMatchObject({ gpu: 'RTX 4090 | A100', gpu_rented: false, attempts: [] });
    begin(1, { name: 'A100', count: 1 });
    store.attempts.notCreated('r1', 1, 'offer_gone', 'gone');
    expect(view()).toMatchObject({ gpu: 'RTX 4090 | A100', gpu_rented: false, attempts: [{ gpu_name: 'A100', num_gpus: 1 }] });
  });

  it("is the GPU the latest attempt's offer rents once its create is sent, with the count when more than one", () => {
    begin(1, { name: 'A100', count: 1 });
    store.attempts.adopt('r1', 1, 501, 2);
    expect(view()).toMatchObject({ gpu: 'A100', gpu_rented: true });
    begin(2, { name: 'RTX 4090', count: 2 });
    expect(view()).toMatchObject({
      gpu: '2× RTX 4090',
      gpu_rented: true,
      attempts: [
        { n: 1, gpu_name: 'A100', num_gpus: 1 },
        { n: 2, gpu_name: 'RTX 4090', num_gpus: 2 },
      ],
    });
    // The third failed to create: the run still shows the GPU it last rented.
    begin(3, { name: 'H100 SXM', count: 1 });
    store.attempts.notCreated('r1', 3, 'failed', 'refused');
    expect(view()).toMatchObject({ gpu: '2× RTX 4090', gpu_rented: true });
  });

  it('falls back to what the spec asks for when the attempts were journaled before berth kept their GPU', () => {
    begin(1, null);
    store.attempts.adopt('r1', 1, 501, 2);
    expect(view()).toMatchObject({ gpu: 'RTX 4090 | A100', gpu_rented: false, attempts: [{ gpu_name: null, num_gpus: null }] });
  });
});

describe('run view: a kept instance (keep_on_failure_s, issue #50)', () => {
  const progress = (state: 'running' | 'keeping', keepUntil: number | null) =>
    store.runs.saveProgress('r1', {
      state,
      relaxLevel: 0,
      attempt: 1,
      error: null,
      snapshotJson: JSON.stringify({ value: state, context: { current: { n: 1, keepUntil } } }),
      machineVersion: 11,
      at: 5,
    });

  it("shows the keep's bound from the stored machine while the run is keeping, and none in any other state", () => {
    begin(1, { name: 'A100', count: 1 });
    store.attempts.adopt('r1', 1, 501, 2);
    progress('running', null);
    expect(view().instance).toMatchObject({ id: 501, keep_until: null });
    progress('keeping', Date.parse('2026-01-01T00:01:00Z'));
    expect(view()).toMatchObject({ state: 'keeping', instance: { id: 501, keep_until: '2026-01-01T00:01:00.000Z' } });
    // Before the machine read its clock for the bound: held, the bound not known yet.
    progress('keeping', null);
    expect(view().instance).toMatchObject({ id: 501, keep_until: null });
  });
});
