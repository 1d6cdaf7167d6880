// Durations up to their documented maxima and the store's retention, against the simulator with an
// in-process daemon (issue #14 items 12 and 24; kept outputs, issue #40).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import { jobSpec, startWorld, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const DAY_S = 86_400;

describe('long durations (item 12)', () => {
  it('runs a job whose deadline and boot timeout are 30 days instead of failing it at once', async () => {
    world = await startWorld();
    const res = await world.api<RunView>('POST', '/v1/runs', jobSpec({ deadline_s: 30 * DAY_S, boot_timeout_s: 30 * DAY_S }));
    expect(res.status).toBe(201);
    const run = await world.waitFor(res.body.id, (r) => r.state === 'running' || r.state === 'failed');
    expect(run.state, JSON.stringify(run.error)).toBe('running');
    await world.api('POST', `/v1/runs/${run.id}/cancel`);
    await world.waitFor(run.id, (r) => r.state === 'cancelled');
  });

  it('refuses a deadline past its documented maximum (365 days) at submit', async () => {
    world = await startWorld();
    const res = await world.api<{ error: { issues: unknown[] } }>('POST', '/v1/runs', jobSpec({ deadline_s: 400 * DAY_S }));
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ path: '$.deadline_s', message: 'must be at most 31536000' }]);
  });
});

describe('retention (item 24)', () => {
  it('deletes runs that ended more than store.retention_days ago, with their events, and keeps the rest', async () => {
    world = await startWorld({ config: { store: { retention_days: 30 } } });
    const kept = await world.api<RunView>('POST', '/v1/runs', jobSpec({ name: 'kept' }));
    await world.api('POST', `/v1/runs/${kept.body.id}/cancel`);
    await world.waitFor(kept.body.id, (r) => r.state === 'cancelled');

    const old = Date.now() - 40 * DAY_S * 1000;
    const db = new Database(join(world.home, 'berth.db'));
    db.prepare(
      `INSERT INTO runs (id, name, spec_json, state, created_at, updated_at, ended_at) VALUES ('oldrun', 'old', '{}', 'cancelled', ?, ?, ?)`,
    ).run(old, old, old);
    db.prepare(`INSERT INTO events (run_id, at, type, message) VALUES ('oldrun', ?, 'state', 'old')`).run(old);
    db.close();
    // Kept outputs: the old run's go with it; the kept run's, another store's and a folder without
    // berth's mark stay.
    const storeId = (JSON.parse(readFileSync(join(world.home, 'store.json'), 'utf8')) as { store_id: string }).store_id;
    const outputs = join(world.home, 'outputs');
    const folder = (name: string, owner: string | null) => {
      mkdirSync(join(outputs, name, 'attempt-1'), { recursive: true });
      writeFileSync(join(outputs, name, 'attempt-1', 'model.bin'), 'weights');
      if (owner !== null) writeFileSync(join(outputs, name, '.berth-store'), `${owner}\n`);
    };
    folder('oldrun', storeId);
    folder(kept.body.id, storeId);
    folder('otherstore', 'ffffffff');
    folder('usersown', null);

    await world.restartDaemon();
    await world.daemon.ready;
    expect((await world.api('GET', '/v1/runs/oldrun')).status).toBe(404);
    expect((await world.api<RunView>('GET', `/v1/runs/${kept.body.id}`)).body.state).toBe('cancelled');
    const check = new Database(join(world.home, 'berth.db'), { readonly: true });
    expect(check.prepare(`SELECT count(*) AS n FROM events WHERE run_id = 'oldrun'`).get()).toEqual({ n: 0 });
    check.close();
    // The sweep follows the purge in the same round.
    await vi.waitFor(() => expect(existsSync(join(outputs, 'oldrun'))).toBe(false));
    for (const name of [kept.body.id, 'otherstore', 'usersown'])
      expect(existsSync(join(outputs, name, 'attempt-1', 'model.bin'))).toBe(true);
  });
});
