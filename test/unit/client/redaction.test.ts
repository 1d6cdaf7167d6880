// A whole client session logged the way the daemon logs it (events through `onEvent`, errors with
// toRunError and as objects) must never show the API key, an instance key or an env value.
import { Writable } from 'node:stream';
import { afterEach, expect, it } from 'vitest';
import { createMarketClient } from '../../../src/client/marketplace-client.js';
import { toRunError } from '../../../src/errors.js';
import { createLogger } from '../../../src/logger.js';
import { json, startFakeServer, testConfig, type FakeServer } from './fake-server.js';

const API_KEY = 'sk-live-ABCDEF0123456789-redact-me';
const INSTANCE_KEY = 'ik-instance-key-9876543210';
const ENV_VALUE = 'hf_env_value_should_never_be_logged';

let server: FakeServer | undefined;
afterEach(async () => server?.close());

it('a logged session never shows the API key, the instance key or env values', async () => {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString('utf8'));
      cb();
    },
  });
  const log = createLogger({ destination, level: 'debug' });

  let creates = 0;
  server = await startFakeServer((q, res) => {
    if (q.url.startsWith('/api/v0/asks/')) {
      creates++;
      if (creates === 1) return json(res, 503, { success: false, error: 'busy', msg: 'busy' });
      if (creates === 2) return json(res, 429, { detail: 'API requests too frequent endpoint threshold=100' });
      if (creates === 3) return json(res, 200, { success: true, new_contract: 1, instance_api_key: INSTANCE_KEY });
      if (creates === 4) return res.socket?.destroy();
      // The service echoing input back in an error must not leak it either.
      return json(res, 400, { success: false, error: 'invalid_args', msg: `bad env ${ENV_VALUE} for key ${API_KEY}` });
    }
    if (q.url === '/api/v0/users/current/')
      return json(res, 401, { success: false, error: 'auth_error', msg: `Invalid user key ${API_KEY}` });
    // A service that sends extra_env although it was not asked for (select_cols) must not leak it either.
    if (q.url.startsWith('/api/v1/instances/')) {
      return json(res, 200, {
        success: true,
        next_token: null,
        instances: [{ id: 1, label: 'l', machine_id: 1, actual_status: 'running', extra_env: [['HF_TOKEN', ENV_VALUE]] }],
      });
    }
    return json(res, 404, { success: false, error: 'not_found', msg: '' });
  });

  const client = createMarketClient({
    baseUrl: server.url,
    apiKey: API_KEY,
    config: testConfig(),
    onEvent: (event) => log.info({ event }, `client ${event.type}`),
  });
  const request = { image: 'img', disk: 10, label: 'berth:s:r:1', env: { HF_TOKEN: ENV_VALUE }, onstart: 'echo hi' };
  const attempt = async (what: string, fn: () => Promise<unknown>) => {
    try {
      const result = await fn();
      log.info({ what, result }, `${what} ok`);
    } catch (err) {
      log.warn({ what, err, error: toRunError(err), request }, `${what} failed: ${toRunError(err).message}`);
    }
  };

  await attempt('create', () => client.createInstance(1, request)); // 503, 429, then created with a key
  await attempt('create', () => client.createInstance(2, request)); // dropped: ambiguous
  await attempt('create', () => client.createInstance(3, request)); // 400 echoing secrets
  await attempt('user', () => client.currentUser()); // 401
  await attempt('list', () => client.listInstances());
  log.info({ stats: client.stats() }, 'client stats');
  await client.close();
  log.flush();

  const output = lines.join('');
  expect(output).toContain('client retry');
  expect(output).toContain('client rate_limited');
  expect(output).toContain('client ambiguous_create');
  expect(output).toContain('BERTH_API_KEY');
  expect(output).not.toContain(API_KEY);
  expect(output).not.toContain(INSTANCE_KEY);
  expect(output).not.toContain(ENV_VALUE);
});
