// `secrets` apart from `env` (issue #41 item 2), through a spawned daemon and a task that prints
// both: an env value that is a common word is shown as written; a `secrets` value (and an env value
// under a secret name) never appears in the logs, the events, the API the CLI and the dashboard read
// (`/v1/runs`, `/v1/runs/{id}`, its events and logs), or the daemon's own log.
// `berth validate` warns of an env variable whose name says it is a secret.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, isEnded, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;
let home: string | undefined;

const world = useSpawnedWorld();

const SECRET = 'hf_correcthorsebatterystaple42';
const NAMED_SECRET = 'wandb-0f1e2d3c4b5a';

it('a task shows its env value as written and never a secret: logs, events, the API and the daemon log', async () => {
  sim = await world.sim({
    seed: 11,
    config: { ...FAST_SIM, logs: { upload_delay_s: 0 }, onstart_exec: { enabled: true, timeout_s: 30 } },
  });
  home = world.home('berth-secrets-');
  daemon = await world.spawn({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
  const spec = jobSpec({
    ready_when: 'status',
    env: { MODEL: 'weights', WANDB_API_KEY: NAMED_SECRET },
    secrets: { HF_TOKEN: SECRET },
    run: 'echo "loaded $MODEL"; echo "token $HF_TOKEN"; echo "wandb $WANDB_API_KEY"; echo "the battery of horse tests passed"',
  });
  const created = await daemon.api<RunView>('POST', '/v1/runs', spec);
  expect(created.status).toBe(201);
  const runId = created.body.id;
  const done = await daemon.waitFor(runId, isEnded, 30_000);
  expect(done.state).toBe('succeeded');

  const logs = done.attempts[0]!.logs ?? '';
  expect(logs).toContain('loaded weights');
  expect(logs).toContain('token [redacted]');
  expect(logs).toContain('wandb [redacted]');
  expect(logs).toContain('the battery of horse tests passed');

  const seen = [
    JSON.stringify((await daemon.api('GET', '/v1/runs')).body),
    JSON.stringify((await daemon.api('GET', `/v1/runs/${runId}`)).body),
    JSON.stringify((await daemon.api('GET', `/v1/runs/${runId}/events`)).body),
    JSON.stringify((await daemon.api('GET', `/v1/runs/${runId}/logs`)).body),
    (await berth(['logs', runId], userEnv(home))).stdout,
    (await berth(['events', runId], userEnv(home))).stdout,
  ];
  await daemon.stop();
  seen.push(readFileSync(join(home, 'daemon.log'), 'utf8'));
  for (const text of seen) {
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(NAMED_SECRET);
  }
  expect(seen[4]).toContain('loaded weights');
});

it('validate warns of an env variable whose name says it is a secret, and passes the spec (exit 0)', async () => {
  home = world.home('berth-secrets-');
  const file = join(home, 'job.json');
  writeFileSync(file, JSON.stringify(jobSpec({ env: { HF_TOKEN: 'x', MODEL: 'llama' }, secrets: { DB_PASSWORD: 'y' } })));
  const r = await berth(['validate', file], userEnv(home));
  expect(r.code, r.stderr).toBe(0);
  expect(r.stderr).toMatch(/warning: env\.HF_TOKEN: .*move it to "secrets"/);
  expect(r.stderr).not.toMatch(/MODEL|DB_PASSWORD/);
  const both = join(home, 'both.json');
  writeFileSync(both, JSON.stringify(jobSpec({ env: { A: 'x' }, secrets: { A: 'y' } })));
  const refused = await berth(['validate', both], userEnv(home));
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/secrets\.A: is also in env/);
});
