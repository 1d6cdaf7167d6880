// `berth simulate` as a function: config file validation, the one JSON line, clean shutdown.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test, vi } from 'vitest';
import { simulateCommand } from '../../../src/cli/simulate.js';
import { ConfigError } from '../../../src/errors.js';
import { waitFor } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-sim-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configFile(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

test('a bad config value stops it with an error naming the field', async () => {
  const err = await simulateCommand({ config: configFile('bad.json', '{"faults": {"drop_rate": 3}}'), env: {} }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as ConfigError).field).toBe('faults.drop_rate');
  expect((err as Error).message).toContain('faults.drop_rate');
  await expect(simulateCommand({ config: configFile('broken.json', '{'), env: {} })).rejects.toThrow(/not valid JSON/);
  await expect(simulateCommand({ config: join(dir, 'missing.json'), env: {} })).rejects.toThrow(/ENOENT/);
});

test('prints one JSON line with the url and BERTH_API_KEY, serves, and closes on SIGTERM', async () => {
  const lines: string[] = [];
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  const before = new Set(process.listeners('SIGTERM'));
  try {
    const done = simulateCommand({
      config: configFile('ok.json', '{"catalog": {"size": 50}}'),
      seed: 3,
      timeScale: 10,
      env: { BERTH_API_KEY: 'cli-test-key-123' },
    });
    const line = await waitFor(() => lines.find((l) => l.startsWith('{')), 3000, 'the JSON line');
    const info = JSON.parse(line) as { url: string; api_key: string };
    expect(info.api_key).toBe('cli-test-key-123');
    expect(info.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${info.url}/api/v0/bundles/`, {
      method: 'POST',
      headers: { authorization: 'Bearer cli-test-key-123' },
      body: '{"limit": 100, "verified": {"in": [true, false]}}',
    });
    expect(((await res.json()) as { offers: unknown[] }).offers).toHaveLength(50);
    // Call only the handler the command installed, not the test runner's own.
    const ours = process.listeners('SIGTERM').filter((l) => !before.has(l));
    expect(ours).toHaveLength(1);
    (ours[0] as () => void)();
    await done;
    await expect(fetch(`${info.url}/api/v0/users/current/`)).rejects.toThrow();
    expect(process.listeners('SIGTERM').filter((l) => !before.has(l))).toHaveLength(0);
  } finally {
    write.mockRestore();
  }
});
