import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

describe('config', () => {
  it('loads the defaults when nothing else is given', () => {
    const { config } = loadConfig({}, {});
    expect(config.polling.interval_s).toBe(10);
    expect(config.rate_limits.search.per_s).toBe(0.16);
    expect(config.runs.relax).toEqual([{ drop: ['verified'] }]);
  });

  it('overlays a partial user file, then the environment, then flags', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-cfg-'));
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
    expect(env).toEqual({ home: dir, apiKey: 'k' });
  });

  it('names the bad field and stops', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-cfg-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ polling: { interval_s: -1 } }));
    expect(() => loadConfig({ configFile: file }, {})).toThrow(ConfigError);
    expect(() => loadConfig({ configFile: file }, {})).toThrow(/polling\.interval_s/);
    expect(() => loadConfig({ listen: '0.0.0.0:80' }, {})).toThrow(/daemon\.listen.*loopback/);
  });
});
