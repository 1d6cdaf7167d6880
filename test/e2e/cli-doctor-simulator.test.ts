// `berth doctor` against the bundled simulator: its ssh_key check is about berth's own login key
// (docs/ssh.md): made on first need, usable, and whether the account holds it yet; a key file
// others may read fails the check with the fix.
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import { berthKeyPath, loadLoginKey } from '../../src/ssh/key-pair.js';
import { berth, userEnv } from '../helpers/berth-cli.js';

let bare: RunningSimulator;
let withKey: RunningSimulator;
let home: string;
let keyedHome: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'berth-doctor-'));
  keyedHome = mkdtempSync(join(tmpdir(), 'berth-doctor-keyed-'));
  const key = loadLoginKey({ home: keyedHome });
  [bare, withKey] = await Promise.all([
    startSimulator({ config: { rate_limits: { enabled: false } } }),
    startSimulator({ config: { rate_limits: { enabled: false }, account: { ssh_keys: [key.publicLine] } } }),
  ]);
});

afterAll(async () => {
  await Promise.all([bare?.close(), withKey?.close()]);
  rmSync(home, { recursive: true, force: true });
  rmSync(keyedHome, { recursive: true, force: true });
});

describe("berth doctor's ssh_key check", () => {
  it("makes berth's key on first need and passes, saying the daemon puts it on the account", async () => {
    const r = await berth(['doctor'], userEnv(home, { BERTH_API_URL: bare.url, BERTH_API_KEY: bare.apiKey }));
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^ok {4}ssh_key +berth's SSH key \S+id_ed25519 \(SHA256:\S+\) is usable; not on the account yet: the daemon adds it/m,
    );
    expect(statSync(berthKeyPath(home)).mode & 0o777).toBe(0o600);
  });

  it('says the key is on the account once it is', async () => {
    const r = await berth(['doctor'], userEnv(keyedHome, { BERTH_API_URL: withKey.url, BERTH_API_KEY: withKey.apiKey }));
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ok {4}ssh_key +berth's SSH key .* is usable and on the account$/m);
  });

  it('fails with the fix when the key file is readable by others (0644)', async () => {
    const path = berthKeyPath(home);
    chmodSync(path, 0o644);
    try {
      const r = await berth(['doctor'], userEnv(home, { BERTH_API_URL: bare.url, BERTH_API_KEY: bare.apiKey }));
      expect(r.code).toBe(1);
      expect(r.stdout).toContain(
        `FAIL  ssh_key      The SSH private key ${path} is readable by others (mode 0644): run: chmod 600 ${path}.`,
      );
    } finally {
      chmodSync(path, 0o600);
    }
  });
});
