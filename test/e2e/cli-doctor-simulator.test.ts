// `berth doctor` against the bundled simulator: its ssh_key check fails (the simulator registers no
// key unless its config lists one), and doctor now says why instead of leaving a newcomer to guess;
// with a key registered, every check passes and no hint is printed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import { berth, userEnv } from '../helpers/berth-cli.js';

let bare: RunningSimulator;
let withKey: RunningSimulator;
let home: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'berth-doctor-'));
  [bare, withKey] = await Promise.all([
    startSimulator({ config: { rate_limits: { enabled: false } } }),
    startSimulator({
      config: { rate_limits: { enabled: false }, account: { ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB2 me@laptop'] } },
    }),
  ]);
});

afterAll(async () => {
  await Promise.all([bare?.close(), withKey?.close()]);
  rmSync(home, { recursive: true, force: true });
});

describe('berth doctor on the simulator', () => {
  it('fails its ssh_key check and says why, naming the simulator config that registers a key', async () => {
    const r = await berth(['doctor'], userEnv(home, { BERTH_API_URL: bare.url, BERTH_API_KEY: bare.apiKey }));
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^FAIL {2}ssh_key/m);
    expect(r.stderr).toContain('if it is `berth simulate`, it registers no SSH key unless its config lists one (account.ssh_keys');
  });

  it('passes every check with a key registered, without the hint', async () => {
    const r = await berth(['doctor'], userEnv(home, { BERTH_API_URL: withKey.url, BERTH_API_KEY: withKey.apiKey }));
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stderr).toBe('');
  });
});
