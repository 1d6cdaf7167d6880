// A submission with a workdir while berth's SSH key cannot be used (issue #48 item 6), on a real
// SQLite store: refused as a spec error on $.workdir that says why and how to fix it, nothing stored
// and nothing handed to the runs; the same spec goes through once the key can be used, and a spec
// without a workdir never asks.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { loadConfig } from '../../../../src/config/load.js';
import { Submissions } from '../../../../src/daemon/runs/submission.js';
import { SpecError } from '../../../../src/errors.js';
import { silentLogger } from '../../../../src/logger.js';
import { openStore, type Store } from '../../../../src/store/index.js';

const KEY_PROBLEM =
  'The SSH private key /home/u/.berth/ssh/id_ed25519 is readable by others (mode 0644): run: chmod 600 /home/u/.berth/ssh/id_ed25519.';
const archive = Buffer.from('packed');
const sha256 = createHash('sha256').update(archive).digest('hex');
const spec = { name: 'job', image: 'ubuntu:22.04', max_price_per_hour: 0.5, run: 'python3 train.py' };
const withWorkdir = { ...spec, workdir: './code', workdir_sha256: sha256 };

let dir: string;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-submit-workdir-'));
  store = openStore({ home: dir });
  store.blobs.put(sha256, archive, 1);
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

function submissions(loginBlocked: () => string | undefined) {
  const started: string[] = [];
  let asked = 0;
  const s = new Submissions({
    store,
    clock: { now: () => 1000 },
    config: loadConfig({}, {}).config,
    log: silentLogger(),
    intake: { assertAccepting: () => undefined, started: (row) => started.push(row.id) },
    loginBlocked: () => {
      asked++;
      return loginBlocked();
    },
  });
  return { s, started, asked: () => asked };
}

it('refuses a workdir while the key cannot be used, naming the field and the fix; nothing stored or started', async () => {
  let problem: string | undefined = KEY_PROBLEM;
  const { s, started } = submissions(() => problem);
  let err: unknown;
  try {
    await s.submit(withWorkdir);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(SpecError);
  expect((err as SpecError).issues).toEqual([
    {
      path: '$.workdir',
      message:
        'cannot reach an instance now, so nothing was rented: berth puts it there over SSH, but the SSH private key /home/u/.berth/ssh/id_ed25519 is readable by others (mode 0644): run: chmod 600 /home/u/.berth/ssh/id_ed25519; then submit again (the daemon needs no restart)',
    },
  ]);
  expect(store.runs.live()).toEqual([]);
  expect(started).toEqual([]);

  problem = undefined; // chmod 600 done
  expect((await s.submit(withWorkdir)).created).toBe(true);
  expect(started).toHaveLength(1);
});

it('a spec without a workdir does not ask about the key', async () => {
  const { s, asked } = submissions(() => KEY_PROBLEM);
  expect((await s.submit(spec)).created).toBe(true);
  expect(asked()).toBe(0);
});
