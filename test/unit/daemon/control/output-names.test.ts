// The names of a task's outputs in the run object, on a real SQLite store (issue #48 item 5): a file
// named after one of the run's secrets is shown scrubbed, as a log line is, and the file route finds
// the kept file by the name shown.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { keptFileShownAs } from '../../../../src/daemon/control/output-names.js';
import { loadRunView } from '../../../../src/daemon/control/run-view.js';
import { openStore, type Store } from '../../../../src/store/index.js';

const SECRET = 'hf_s3cr3tTokenValue42';
let dir: string;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-output-names-'));
  store = openStore({ home: dir });
  const spec = { name: 'a', image: 'img', run: 'python3 train.py', secrets: { HF_TOKEN: SECRET }, env: { MODE: 'fast' } };
  store.runs.insert({ id: 'r1', name: 'a', specJson: JSON.stringify(spec), createdAt: 1 });
  store.outputs.begin({ runId: 'r1', attempt: 1, state: 'collecting', host: 'box', dir: '/k', detail: null, at: 2 });
  store.outputs.finish({
    runId: 'r1',
    attempt: 1,
    state: 'kept',
    files: [
      { path: `/root/workdir/out/${SECRET}.txt`, name: `out/${SECRET}.txt`, size: 3, sha256: 'ab'.repeat(32) },
      { path: '/root/workdir/out/fast.txt', name: 'out/fast.txt', size: 1, sha256: 'cd'.repeat(32) },
    ],
    detail: null,
    at: 3,
  });
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

it('shows an output named after a secret scrubbed, and serves it by that name; other names as they are', () => {
  const shown = loadRunView(store, 'r1', 10)!.outputs[0]!.files;
  expect(JSON.stringify(shown)).not.toContain(SECRET);
  expect(shown.map((f) => [f.name, f.path])).toEqual([
    ['out/[redacted].txt', '/root/workdir/out/[redacted].txt'],
    ['out/fast.txt', '/root/workdir/out/fast.txt'],
  ]);
  const row = store.runs.get('r1')!;
  const kept = store.outputs.get('r1', 1)!.files;
  expect(keptFileShownAs(row.spec_json, kept, 'out/[redacted].txt')?.name).toBe(`out/${SECRET}.txt`);
  expect(keptFileShownAs(row.spec_json, kept, `out/${SECRET}.txt`)).toBeUndefined();
  expect(keptFileShownAs(row.spec_json, kept, 'out/fast.txt')?.name).toBe('out/fast.txt');
});
