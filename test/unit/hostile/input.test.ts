// Input a hostile tester tried that no other test did (issue #14): prototype keys, numbers JSON
// cannot hold, durations past the timer limit, ports and addresses out of range.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { issuesOfText } from '../../helpers/spec-issues.js';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/errors.js';
import { parseJobSpecText } from '../../../src/job-spec/validate.js';

const base = '{"name":"job","image":"ubuntu:22.04","max_price_per_hour":0.5';

const dirs: string[] = [];
function configFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-hostile-'));
  dirs.push(dir);
  const file = join(dir, 'config.json');
  writeFileSync(file, text);
  return file;
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('prototype keys (item 23)', () => {
  it.each([
    ['env', `${base},"env":{"__proto__":"x","A":"1"}}`, '$.env'],
    ['env constructor', `${base},"env":{"constructor":"x"}}`, '$.env'],
    ['a filter', `${base},"search":{"filters":{"__proto__":{"eq":1}}}}`, '$.search.filters'],
    ['a relax step', `${base},"relax":[{"set":{"constructor":{"eq":1}}}]}`, '$.relax[0].set'],
  ])('refuses __proto__-like keys in %s with a clear error instead of dropping them', (_, text, path) => {
    const issues = issuesOfText(text);
    expect(
      issues.some((i) => i.path.startsWith(path) && /reserved name/.test(i.message)),
      JSON.stringify(issues),
    ).toBe(true);
  });

  it('refuses __proto__ in a config file, naming it', () => {
    const file = configFile('{"runs":{"__proto__":{"max_attempts":1}}}');
    expect(() => loadConfig({ configFile: file }, {})).toThrow(ConfigError);
    expect(() => loadConfig({ configFile: file }, {})).toThrow(/runs\.__proto__: is a reserved name/);
  });
});

describe('numbers JSON cannot hold (item 21)', () => {
  it('says that 1e309 is too large instead of "expected a number, got number"', () => {
    const issues = issuesOfText(`${base.replace('0.5', '1e309')},"deadline_s":-1e309}`);
    expect(issues).toContainEqual({ path: '$.max_price_per_hour', message: expect.stringMatching(/too large to be a number/) });
    expect(issues).toContainEqual({ path: '$.deadline_s', message: expect.stringMatching(/too large to be a number/) });
    expect(JSON.stringify(issues)).not.toContain('got number');
  });

  it('says the same of a config value', () => {
    const file = configFile('{"polling":{"interval_s":1e309}}');
    expect(() => loadConfig({ configFile: file }, {})).toThrow(/polling\.interval_s: is too large to be a number/);
  });
});

describe('durations have documented maxima (item 12)', () => {
  it('accepts a 30-day deadline and refuses one past 365 days', () => {
    expect(parseJobSpecText(`${base},"deadline_s":2592000}`).deadline_s).toBe(2_592_000);
    expect(issuesOfText(`${base},"deadline_s":1e300,"boot_timeout_s":40000000}`)).toEqual([
      { path: '$.boot_timeout_s', message: 'must be at most 31536000' },
      { path: '$.deadline_s', message: 'must be at most 31536000' },
    ]);
  });

  it.each([
    ['polling.interval_s', '{"polling":{"interval_s":2592000}}'],
    ['service.timeout_s', '{"service":{"timeout_s":2592000}}'],
    ['retry.max_delay_s', '{"retry":{"max_delay_s":2592000}}'],
    ['runs.outage_backoff_s', '{"runs":{"outage_backoff_s":2592000}}'],
  ])('refuses a %s past the timer limit, naming it', (field, text) => {
    expect(() => loadConfig({ configFile: configFile(text) }, {})).toThrow(
      new RegExp(`${field.replace('.', '\\.')}: Too big: expected number to be <=`),
    );
  });
});

describe('config addresses (item 19)', () => {
  it('refuses a listen port past 65535', () => {
    expect(() => loadConfig({ listen: '127.0.0.1:65536' }, {})).toThrow(/daemon\.listen: the port must be 0 to 65535/);
    expect(() => loadConfig({ listen: '127.0.0.1:99999999' }, {})).toThrow(/daemon\.listen/);
    expect(loadConfig({ listen: '127.0.0.1:65535' }, {}).config.daemon.listen).toBe('127.0.0.1:65535');
  });

  it.each(['ftp://example.com', 'file:///etc/passwd', 'javascript:alert(1)'])('refuses base_url %s: http(s) only', (url) => {
    expect(() => loadConfig({}, { BERTH_API_URL: url })).toThrow(/service\.base_url: must be an http:\/\/ or https:\/\/ address/);
  });

  it('refuses an API key holding a line break without printing it', () => {
    let message = '';
    try {
      loadConfig({}, { BERTH_API_KEY: 'abc\ndef-secret' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/BERTH_API_KEY contains a space, a line break/);
    expect(message).not.toContain('def-secret');
  });
});
