// The scaffolding of the end-to-end tests that spawn `berth daemon` (./daemon-process.ts): the
// simulators, temp homes and daemon processes a test makes, all ended by the afterEach this
// registers (every daemon still alive SIGKILLed, then the simulators closed, then the homes removed).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { startSimulator, type RunningSimulator, type SimConfigInput } from '../../src/sim/index.js';
import { loadLoginKey, publicKeyPart } from '../../src/ssh/key-pair.js';
import { spawnDaemon, type DaemonProcess, type DaemonSetup } from './daemon-process.js';
import { FAST_CONFIG, FAST_SIM } from './world.js';

export interface SpawnedWorld {
  /** Starts a simulator in this process; closed after the test. */
  sim(options: Parameters<typeof startSimulator>[0]): Promise<RunningSimulator>;
  /** A new temp dir (a BERTH_HOME); removed after the test. */
  home(prefix?: string): string;
  /** Spawns `berth daemon` (./daemon-process.ts); SIGKILLed after the test if still alive. */
  spawn(setup: DaemonSetup, timeoutMs?: number): Promise<DaemonProcess>;
  /**
   * A home with berth's own SSH key in it, a simulator whose instances run a real sshd that takes
   * that key (put on the account, as a user would), run their onstart and upload logs at once, and
   * a daemon on both (`setup` spawns it again).
   */
  sshWorld(options: SshWorldOptions): Promise<SshWorld>;
}

interface SshWorldOptions {
  seed: number;
  /** More of the simulator's config (its faults, say); the SSH parts above stay. */
  sim?: SimConfigInput;
  /** More of the daemon's config. */
  config?: Record<string, unknown>;
  /** The simulator's onstart_exec.timeout_s (default 60). */
  onstartTimeoutS?: number;
  homePrefix?: string;
}

interface SshWorld {
  home: string;
  sim: RunningSimulator;
  daemon: DaemonProcess;
  setup: DaemonSetup;
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
    async sshWorld(options) {
      const home = this.home(options.homePrefix);
      const key = loadLoginKey({ home });
      const sim = await this.sim({
        seed: options.seed,
        config: {
          ...FAST_SIM,
          logs: { upload_delay_s: 0 },
          ...options.sim,
          account: { ssh_keys: [key.publicLine] },
          ssh_listeners: { enabled: true },
          onstart_exec: { ...options.sim?.onstart_exec, enabled: true, timeout_s: options.onstartTimeoutS ?? 60 },
        },
      });
      const setup = { home, simUrl: sim.url, apiKey: sim.apiKey, config: { ...FAST_CONFIG, ...options.config } };
      return { home, sim, setup, daemon: await this.spawn(setup) };
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until the daemon of `home` has put berth's login key on the simulator's account (its
 * background start does): instances created before it cannot be logged in to.
 */
export async function loginKeyOnAccount(sim: RunningSimulator, home: string, timeoutMs = 15_000): Promise<void> {
  const keys = async () =>
    (
      (await (await fetch(`${sim.url}/api/v0/ssh/`, { headers: { Authorization: `Bearer ${sim.apiKey}` } })).json()) as Array<{
        key: string;
      }>
    ).map((k) => publicKeyPart(k.key));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let mine: string | undefined;
    try {
      mine = publicKeyPart(loadLoginKey({ home }).publicLine);
    } catch {
      // being written
    }
    if (mine && (await keys()).includes(mine)) return;
    if (Date.now() > deadline) throw new Error(`the daemon did not put its key on the account; see ${join(home, 'daemon.log')}`);
    await sleep(50);
  }
}
