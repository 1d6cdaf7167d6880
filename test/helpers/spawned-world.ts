// The scaffolding of the end-to-end tests that spawn `berth daemon` (./daemon-process.ts): the
// simulators, temp homes and daemon processes a test makes, all ended by the afterEach this
// registers (every daemon still alive SIGKILLed, then the simulators closed, then the homes removed).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import { spawnDaemon, type DaemonProcess, type DaemonSetup } from './daemon-process.js';

export interface SpawnedWorld {
  /** Starts a simulator in this process; closed after the test. */
  sim(options: Parameters<typeof startSimulator>[0]): Promise<RunningSimulator>;
  /** A new temp dir (a BERTH_HOME); removed after the test. */
  home(prefix?: string): string;
  /** Spawns `berth daemon` (./daemon-process.ts); SIGKILLed after the test if still alive. */
  spawn(setup: DaemonSetup, timeoutMs?: number): Promise<DaemonProcess>;
}

/** Call once at a test file's top level: registers the cleanup, returns what the tests start with. */
export function useSpawnedWorld(): SpawnedWorld {
  const sims: RunningSimulator[] = [];
  const homes: string[] = [];
  const daemons: DaemonProcess[] = [];
  afterEach(async () => {
    for (const d of daemons.splice(0)) if (d.proc.exitCode === null && d.proc.signalCode === null) await d.kill9();
    await Promise.all(sims.splice(0).map((s) => s.close()));
    for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
  });
  return {
    async sim(options) {
      const sim = await startSimulator(options);
      sims.push(sim);
      return sim;
    },
    home(prefix = 'berth-e2e-') {
      const home = mkdtempSync(join(tmpdir(), prefix));
      homes.push(home);
      return home;
    },
    async spawn(setup, timeoutMs) {
      const daemon = await spawnDaemon(setup, timeoutMs);
      daemons.push(daemon);
      return daemon;
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
