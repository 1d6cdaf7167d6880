// #14 item 6: a service that echoes the API key and env values back in its errors, in every form
// (verbatim, other case, JSON-escaped, cut short, in the `error` field), must not get them into
// the run error, the attempts, the events, the run object, the log or berth.db.
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { startDaemon, type RunningDaemon } from '../../../src/daemon/daemon.js';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import { createLogger } from '../../../src/logger.js';
import { controlApi } from '../../helpers/control-api.js';
import { FAST_CONFIG } from '../../helpers/world.js';
import { json, startFakeServer, type FakeServer } from '../../unit/client/fake-server.js';

const API_KEY = 'sk-Live-4f9a2B7c1d0E8f6A5b3C';
const ENV_VALUE = 'hf_Tok"en\\with-quote-and-ü-9876';

function forms(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  return [
    secret,
    secret.toUpperCase(),
    json,
    json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
    secret.slice(0, 11),
    secret.slice(-8),
  ];
}

/** Any 6-character piece of any form of `secret`, whatever the case. */
function leaks(text: string, secret: string): string | undefined {
  const hay = text.toLowerCase();
  for (const form of forms(secret).map((f) => f.toLowerCase())) {
    for (let i = 0; i + 6 <= form.length; i++) if (hay.includes(form.slice(i, i + 6))) return form.slice(i, i + 6);
  }
  return undefined;
}

let server: FakeServer | undefined;
let daemon: RunningDaemon | undefined;
let home: string | undefined;
afterEach(async () => {
  await daemon?.stop();
  await server?.close();
  if (home) rmSync(home, { recursive: true, force: true });
  daemon = server = home = undefined;
});

it('no form of the key or an env value echoed by the service reaches the run, its events, the log or berth.db', async () => {
  let create = 0;
  const echo = (i: number) => {
    const all = [...forms(API_KEY), ...forms(ENV_VALUE)];
    return all[i % all.length]!;
  };
  server = await startFakeServer((q, res) => {
    if (q.url.startsWith('/api/v0/bundles/')) {
      const offers = [1, 2, 3, 4].map((id) => ({
        id,
        machine_id: id,
        gpu_name: 'RTX 4090',
        num_gpus: 1,
        gpu_ram: 24564,
        dph_total: 0.2,
        direct_port_count: 2,
      }));
      return json(res, 200, { offers });
    }
    if (q.url.startsWith('/api/v0/asks/')) {
      const text = echo(create++);
      return json(res, 400, { success: false, error: text, msg: `error 400/3001: invalid env ${text}; key ${echo(create + 3)}` });
    }
    if (q.url.startsWith('/api/v1/instances/'))
      return json(res, 200, { success: true, instances_found: 0, total_instances: 0, next_token: null, instances: [] });
    return json(res, 404, { success: false, error: 'not_found', msg: `nothing here for ${API_KEY.toUpperCase()}` });
  });
  home = mkdtempSync(join(tmpdir(), 'berth-echo-'));
  const lines: string[] = [];
  const logger = createLogger({
    level: 'debug',
    destination: new Writable({
      write(chunk: Buffer, _e, cb) {
        lines.push(chunk.toString('utf8'));
        cb();
      },
    }),
  });
  daemon = await startDaemon({
    env: { BERTH_HOME: home, BERTH_API_URL: server.url, BERTH_API_KEY: API_KEY },
    overrides: FAST_CONFIG,
    logger,
  });
  const d = daemon;
  const api = controlApi(() => d);
  const spec = { name: 'echo', image: 'img', max_price_per_hour: 1, max_attempts: 4, relax: [], env: { HF_TOKEN: ENV_VALUE } };
  const run = (await api.api<RunView>('POST', '/v1/runs', spec)).body;
  const failed = await api.waitFor(run.id, (r) => r.state === 'failed', 20_000);
  expect(failed.attempts.map((a) => a.outcome)).toEqual(['create_failed', 'create_failed', 'create_failed', 'create_failed']);
  expect(failed.attempts[0]!.detail).toMatch(/400/);

  const events = JSON.stringify((await api.api('GET', `/v1/runs/${run.id}/events`)).body);
  const list = JSON.stringify((await api.api('GET', '/v1/runs')).body);
  await daemon.stop();
  daemon = undefined;
  logger.flush();

  const db = new Database(join(home, 'berth.db'), { readonly: true });
  const rows = JSON.stringify([
    db.prepare('SELECT error_json, snapshot_json FROM runs').all(),
    db.prepare('SELECT * FROM attempts').all(),
    db.prepare('SELECT * FROM events').all(),
  ]);
  db.close();
  const dbBytes = readFileSync(join(home, 'berth.db')).toString('latin1') + readFileSync(join(home, 'berth.db'), 'utf8');

  for (const [where, text] of Object.entries({ run: JSON.stringify(failed), list, events, log: lines.join(''), rows })) {
    expect({ where, key: leaks(text, API_KEY) }).toEqual({ where, key: undefined });
    expect({ where, env: leaks(text, ENV_VALUE) }).toEqual({ where, env: undefined });
  }
  // berth.db holds the spec with its env values (needed to create), never the key.
  expect(leaks(dbBytes, API_KEY)).toBeUndefined();
});
