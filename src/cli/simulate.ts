// `berth simulate`: runs the marketplace simulator in the foreground. Prints one JSON line
// `{"url", "api_key"}` on stdout once listening (scripts read it), then serves until SIGINT/SIGTERM;
// a second signal exits at once.
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { parseSimConfig, startSimulator } from '../sim/index.js';

export interface SimulateOptions {
  port?: number;
  /** Path of a sim config JSON file (docs/simulator.md lists the fields). */
  config?: string;
  seed?: number;
  timeScale?: number;
  env: NodeJS.ProcessEnv;
}

export async function simulateCommand(opts: SimulateOptions): Promise<void> {
  const config = parseSimConfig(withOnstart(withSshListeners(opts.config ? readConfigFile(opts.config) : {})));
  const sim = await startSimulator({
    port: opts.port ?? 0,
    seed: opts.seed,
    timeScale: opts.timeScale,
    apiKey: opts.env.BERTH_API_KEY || undefined,
    config,
  });
  process.stdout.write(`${JSON.stringify({ url: sim.url, api_key: sim.apiKey })}\n`);

  await new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = () => {
      if (stopping) process.exit(1);
      stopping = true;
      sim.close().then(
        () => {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          resolve();
        },
        () => process.exit(1),
      );
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

/**
 * berth waits for SSH before a run counts as running (ready_when "ssh"), and the simulator's own
 * SSH hosts resolve nowhere: so `berth simulate` serves real loopback SSH banners unless its
 * config file says `"ssh_listeners": {"enabled": false}`.
 */
function withSshListeners(config: unknown): unknown {
  return withDefaultSection(config, 'ssh_listeners', { enabled: true });
}

/** `config` with `defaults` under its section `key` where the file gives none (a bad section is left for validation). */
function withDefaultSection(config: unknown, key: string, defaults: Record<string, unknown>): unknown {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return config;
  const o = config as Record<string, unknown>;
  const section = o[key];
  if (section !== undefined && (typeof section !== 'object' || section === null)) return config;
  return { ...o, [key]: { ...defaults, ...(section as Record<string, unknown> | undefined) } };
}

/**
 * A task submitted as the README shows must run to its end: `berth simulate` runs onstart scripts
 * (as an unprivileged user in a scratch directory, docs/simulator.md) with an hour's limit per run,
 * unless its config file says `"onstart_exec": {"enabled": false}` (or another `timeout_s`).
 */
function withOnstart(config: unknown): unknown {
  return withDefaultSection(config, 'onstart_exec', { enabled: true, timeout_s: 3600 });
}

function readConfigFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`Cannot read simulator config ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`, undefined, err);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ConfigError(`Simulator config ${path} is not valid JSON: ${(err as Error).message}.`, undefined, err);
  }
}
