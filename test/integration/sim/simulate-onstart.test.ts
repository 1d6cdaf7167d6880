// `berth simulate`, the README's simulator path, runs onstart scripts by default (so a task
// submitted to it runs to its end), with an hour's limit; its config file can turn that off.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test, vi } from 'vitest';
import { simulateCommand } from '../../../src/cli/simulate.js';
import { call, waitFor } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-sim-onstart-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FAST = { admin: true, rate_limits: { enabled: false }, lifecycle: { provision_s: 0, boot_s: { min: 1, max: 1 } } };

/** Runs `berth simulate` with this config file, gives its url and key to `body`, then stops it as SIGTERM does. */
async function withSimulate(config: Record<string, unknown>, body: (sim: { url: string; apiKey: string }) => Promise<void>): Promise<void> {
  const file = join(dir, `sim-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(config));
  const lines: string[] = [];
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  const before = new Set(process.listeners('SIGTERM'));
  try {
    const done = simulateCommand({ config: file, timeScale: 100, env: { BERTH_API_KEY: 'sim-onstart-key-1' } });
    const line = await waitFor(() => lines.find((l) => l.startsWith('{')), 3000, 'the JSON line');
    const info = JSON.parse(line) as { url: string; api_key: string };
    try {
      await body({ url: info.url, apiKey: info.api_key });
    } finally {
      const ours = process.listeners('SIGTERM').filter((l) => !before.has(l));
      (ours[0] as () => void)();
      await done;
    }
  } finally {
    write.mockRestore();
  }
}

async function createWithOnstart(sim: { url: string; apiKey: string }, onstart: string): Promise<number> {
  const offer = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })).body.offers[0];
  return (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', onstart })).body.new_contract as number;
}

const historyOf = async (sim: { url: string; apiKey: string }, id: number) =>
  (
    (await call(sim, 'GET', '/_sim/history')).body.history as Array<{
      id: number;
      onstart: unknown;
      onstart_runs: number;
      statuses: unknown[];
    }>
  ).find((h) => h.id === id)!;

test('runs onstart scripts by default', async () => {
  await withSimulate(FAST, async (sim) => {
    const id = await createWithOnstart(sim, 'echo from-the-task');
    const h = await waitFor(
      async () => {
        const found = await historyOf(sim, id);
        return found.onstart ? found : undefined;
      },
      10_000,
      'the script to run',
    );
    expect(h.onstart).toMatchObject({ run: 1, exit_code: 0, stdout: 'from-the-task\n' });
  });
});

test('a config file with onstart_exec.enabled false turns it off', async () => {
  await withSimulate({ ...FAST, onstart_exec: { enabled: false } }, async (sim) => {
    const id = await createWithOnstart(sim, 'echo from-the-task');
    await waitFor(async () => ((await historyOf(sim, id)).statuses.length >= 2 ? true : undefined), 10_000, 'running');
    await new Promise((r) => setTimeout(r, 100));
    expect(await historyOf(sim, id)).toMatchObject({ onstart: null, onstart_runs: 0 });
  });
});
