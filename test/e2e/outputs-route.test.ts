// The outputs file route of the control API (issue #49 item 5): it serves the files of a run's kept
// manifest by their names in it, and nothing else: a name that climbs out of the attempt's folder
// (to berth's own private key beside it in BERTH_HOME) or any name not in the list is a 404 that
// carries none of the file's bytes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();

it("serves a kept output by its name in the list, and never a name outside it: ../../../ssh/id_ed25519 does not reach berth's private key", async () => {
  const { home, daemon, sim } = await world.sshWorld({ seed: 41 });
  const run = 'mkdir -p "$HOME/workdir/out" && cd "$HOME/workdir" && echo model > out/model.bin && echo notes > out/notes.txt; exit 0';
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run, outputs: ['out/model.bin'] }));
  expect(created.status).toBe(201);
  const done = await daemon.waitFor(created.body.id, isEnded, 90_000);
  expect(done.state).toBe('succeeded');
  expect(done.outputs).toMatchObject([{ attempt: 1, state: 'kept', files: [{ name: 'out/model.bin' }] }]);
  expect(sim.billingNow()).toEqual([]);
  const key = readFileSync(join(home, 'ssh', 'id_ed25519'), 'utf8');
  // The kept folder is BERTH_HOME/outputs/<run>/attempt-1: three levels up is BERTH_HOME.
  const get = async (name: string, attempt = 1) => {
    const res = await fetch(`${daemon.url}/v1/runs/${done.id}/outputs?attempt=${attempt}&name=${encodeURIComponent(name)}`, {
      headers: { authorization: `Bearer ${daemon.token}` },
    });
    return { status: res.status, text: await res.text() };
  };
  expect(await get('out/model.bin')).toEqual({ status: 200, text: 'model\n' });
  for (const name of [
    '../../../ssh/id_ed25519',
    'out/../../../../ssh/id_ed25519',
    join(home, 'ssh', 'id_ed25519'),
    '../../../berth.db',
    // In the container beside the kept one, but not in the list.
    'out/notes.txt',
    'out/model.bin/',
  ]) {
    const r = await get(name);
    expect(r.status, name).toBe(404);
    expect(r.text).not.toContain('PRIVATE KEY');
    expect(r.text).not.toContain(key.split('\n')[1]!);
  }
  expect((await get('out/model.bin', 2)).status).toBe(404);
});
