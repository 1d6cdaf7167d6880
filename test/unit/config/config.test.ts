import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/errors.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'berth-cfg-'));
  dirs.push(d);
  return d;
};
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('config', () => {
  it('loads the defaults when nothing else is given', () => {
    const { config } = loadConfig({}, {});
    expect(config.polling.interval_s).toBe(10);
    expect(config.rate_limits.search.per_s).toBe(0.16);
    expect(config.runs.relax).toEqual([{ drop: ['verified'] }]);
  });

  it('sets every rate limit as the service enforces it: no bursts, >= 100 ms of headroom under each documented minimum interval', () => {
    const { config } = loadConfig({}, {});
    // x-rate-limit of each endpoint's yaml (search: 10 per minute, i.e. one per 6 s at most).
    const documentedMinIntervalMs = {
      search: 6000,
      create: 1000 / 4.5,
      list: 1000,
      show: 500,
      change: 1000,
      bid: 1000 / 5.5,
      destroy: 1000 / 3,
      other: 1000,
    };
    for (const [group, minMs] of Object.entries(documentedMinIntervalMs)) {
      const g = config.rate_limits[group as keyof typeof documentedMinIntervalMs];
      expect({ group, burst: g.burst }).toEqual({ group, burst: 1 });
      expect(1000 / g.per_s - minMs).toBeGreaterThanOrEqual(100);
    }
    expect(config.rate_limits.create.penalty_s).toBe(12);
  });

  it('waits 180 s for SSH by default, and takes a callback address only as http(s)', () => {
    const { config } = loadConfig({}, {});
    expect(config.readiness).toEqual({ ssh_timeout_s: 180, callback_listen: '127.0.0.1:7778' });
    expect(() => loadConfig({ overrides: { readiness: { ssh_timeout_s: 0 } } }, {})).toThrow(/readiness\.ssh_timeout_s/);
    expect(() => loadConfig({ overrides: { readiness: { callback_url: 'ftp://example.com/x' } } }, {})).toThrow(/readiness\.callback_url/);
    expect(() => loadConfig({ overrides: { readiness: { callback_listen: '0.0.0.0:70000' } } }, {})).toThrow(/readiness\.callback_listen/);
    const tunnel = loadConfig(
      { overrides: { readiness: { callback_url: 'https://b.example/ready', callback_listen: '0.0.0.0:7778' } } },
      {},
    );
    expect(tunnel.config.readiness).toMatchObject({ callback_url: 'https://b.example/ready', callback_listen: '0.0.0.0:7778' });
  });

  it('overlays a partial user file, then the environment, then flags', () => {
    const dir = tempDir();
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ polling: { interval_s: 0.5 }, service: { base_url: 'http://127.0.0.1:1' } }));
    const { config, env } = loadConfig(
      { configFile: file, listen: '127.0.0.1:9999' },
      { BERTH_API_URL: 'http://127.0.0.1:2', BERTH_API_KEY: 'k', BERTH_HOME: dir },
    );
    expect(config.polling.interval_s).toBe(0.5);
    expect(config.service.base_url).toBe('http://127.0.0.1:2');
    expect(config.service.timeout_s).toBe(30);
    expect(config.daemon.listen).toBe('127.0.0.1:9999');
    expect(env).toEqual({ home: dir, apiKey: 'k', notifySecrets: {} });
  });

  it('reads the signing key of each notify target from the variable it names, and refuses a named variable that is unset (without printing any value)', () => {
    const notify = [
      { url: 'https://hooks.example.com/a', secret_env: 'HOOK_KEY', events: ['run.failed'] },
      { url: 'http://127.0.0.1:9/b', format: 'slack' },
    ];
    const { config, env } = loadConfig({ overrides: { notify } as never }, { HOOK_KEY: 's3cret-value' });
    expect(env.notifySecrets).toEqual({ HOOK_KEY: 's3cret-value' });
    expect(config.notify.map((t) => t.format)).toEqual(['json', 'slack']);
    expect(() => loadConfig({ overrides: { notify } as never }, {})).toThrow(
      /notify\.0\.secret_env: the environment variable HOOK_KEY is not set/,
    );
    expect(() => loadConfig({ overrides: { notify: [{ url: 'ftp://x', events: ['run.failed'] }] } as never }, {})).toThrow(
      /notify\.0\.url/,
    );
    expect(() => loadConfig({ overrides: { notify: [{ url: 'https://x', events: ['run.exploded'] }] } as never }, {})).toThrow(
      /notify\.0\.events\.0/,
    );
    expect(() =>
      loadConfig({ overrides: { notify: [{ url: 'https://a/h' }, { url: 'https://a/h', format: 'slack' }] } as never }, {}),
    ).toThrow(/notify\.1\.url: names the same receiver/);
    expect(() => loadConfig({ overrides: { notify: [{ url: 'https://user:pw@a/h' }] } as never }, {})).toThrow(
      /notify\.0\.url: must not hold a user name or password/,
    );
  });

  it('names the bad field and stops', () => {
    const dir = tempDir();
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ polling: { interval_s: -1 } }));
    expect(() => loadConfig({ configFile: file }, {})).toThrow(ConfigError);
    expect(() => loadConfig({ configFile: file }, {})).toThrow(/polling\.interval_s/);
    expect(() => loadConfig({ listen: '0.0.0.0:80' }, {})).toThrow(/daemon\.listen.*loopback/);
  });

  it('puts the store in BERTH_HOME by default, or where store.url or BERTH_STORE_URL says', () => {
    expect(loadConfig({}, {}).config.store.url).toBeNull();
    const dir = tempDir();
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ store: { url: '/var/lib/berth/berth.db' } }));
    expect(loadConfig({ configFile: file }, {}).config.store.url).toBe('/var/lib/berth/berth.db');
    const pg = 'postgresql://berth:pw@db.internal:5433/berth';
    expect(loadConfig({ configFile: file }, { BERTH_STORE_URL: pg }).config.store.url).toBe(pg);
  });

  it('refuses a Postgres store.url without a server or a database, naming the field and never the password', () => {
    for (const url of [
      'postgres://berth:Sekr3t@/berth',
      'postgres://berth:Sekr3t@db.internal:5432',
      'postgres://berth:Sekr3t@db.internal:99999/x',
    ]) {
      let thrown: unknown;
      try {
        loadConfig({}, { BERTH_STORE_URL: url });
      } catch (err) {
        thrown = err;
      }
      expect(thrown, url).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).field).toBe('store.url');
      expect((thrown as ConfigError).message).toMatch(/^Invalid configuration: store\.url: /);
      expect((thrown as ConfigError).message).not.toContain('Sekr3t');
    }
  });

  it('has the money guard off by default but for a $1 minimum credit, and the webhook listener off', () => {
    const { config, env } = loadConfig({}, {});
    expect(config.runs.max_runtime_s).toBeNull();
    expect(config.budget).toEqual({ max_usd_per_hour: null, max_usd_per_day: null });
    expect(config.account).toEqual({ min_credit_usd: 1, check_interval_s: 300, held_check_interval_s: 30 });
    expect(config.price_increases).toEqual({ policy: 'reject', check_interval_s: 300 });
    expect(config.webhooks.listen).toBeNull();
    expect(env.webhookSecret).toBeUndefined();
  });

  it('takes the webhook secret from the environment or a file, and refuses a listener without one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-cfg-'));
    const file = join(dir, 'whsec');
    writeFileSync(file, 'whsec_from_file\n');
    const on = { overrides: { webhooks: { listen: '127.0.0.1:8443' } } };
    expect(loadConfig(on, { BERTH_WEBHOOK_SECRET: 'whsec_env' }).env.webhookSecret).toBe('whsec_env');
    expect(loadConfig(on, { BERTH_WEBHOOK_SECRET_FILE: file }).env.webhookSecret).toBe('whsec_from_file');
    expect(loadConfig({ overrides: { webhooks: { listen: '0.0.0.0:8443', secret_file: file } } }, {}).env.webhookSecret).toBe(
      'whsec_from_file',
    );
    expect(() => loadConfig(on, {})).toThrow(/webhooks\.listen is set but there is no webhook secret/);
    expect(() => loadConfig(on, { BERTH_WEBHOOK_SECRET_FILE: join(dir, 'missing') })).toThrow(/Cannot read the webhook secret file/);
    expect(() => loadConfig({ overrides: { webhooks: { listen: 'nonsense' } } }, {})).toThrow(/webhooks\.listen: must be HOST:PORT/);
    expect(() => loadConfig({ overrides: { budget: { max_usd_per_hour: 0 } } }, {})).toThrow(/budget\.max_usd_per_hour/);
    rmSync(dir, { recursive: true, force: true });
  });
});
