// A real `berth daemon` process (the built CLI, as a user runs it) for end-to-end tests: spawn,
// wait until it serves, talk to its control API, SIGKILL it, restart it.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DeepPartial } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { packagePath } from '../../src/package-path.js';
import { controlApi, type ControlApi } from './control-api.js';

export interface DaemonProcess extends ControlApi {
  proc: ChildProcess;
  url: string;
  /** The control token the test calls with (a test that rotates it sets the new one). */
  token: string;
  kill9(): Promise<void>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
}

export interface DaemonSetup {
  home: string;
  simUrl: string;
  apiKey: string;
  config: DeepPartial<Config>;
  /** More arguments of `berth daemon` (e.g. --replace-store). */
  args?: string[];
  /** More environment variables (e.g. a notification signing key). */
  env?: Record<string, string>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The daemon's log lines about one run, and its warnings and errors: the last ones of each. */
function logLinesOf(file: string, runId: string, keep = 40): string {
  let lines: string[];
  try {
    lines = readFileSync(file, 'utf8').split('\n');
  } catch {
    return `(no daemon log at ${file})`;
  }
  const ofRun = lines.filter((l) => l.includes(runId)).slice(-keep);
  const troubles = lines.filter((l) => /"level":(40|50|60)/.test(l) && !l.includes(runId)).slice(-keep);
  return [`daemon log, run ${runId}:`, ...ofRun, 'daemon log, other warnings and errors:', ...troubles].join('\n');
}

export async function spawnDaemon(setup: DaemonSetup, timeoutMs = 15_000): Promise<DaemonProcess> {
  const configFile = join(setup.home, 'config.json');
  writeFileSync(configFile, JSON.stringify(setup.config));
  const proc = spawn(process.execPath, [packagePath('bin', 'berth.js'), 'daemon', '--config', configFile, ...(setup.args ?? [])], {
    env: { ...process.env, ...setup.env, BERTH_HOME: setup.home, BERTH_API_URL: setup.simUrl, BERTH_API_KEY: setup.apiKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(join(setup.home, 'daemon.log'), { flags: 'a' });
  proc.stdout!.pipe(log, { end: false });
  proc.stderr!.pipe(log, { end: false });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));

  // daemon.json names the daemon that wrote it; a killed daemon leaves its own behind.
  const file = join(setup.home, 'daemon.json');
  const deadline = Date.now() + timeoutMs;
  let url = '';
  while (!url) {
    if (proc.exitCode !== null) throw new Error(`daemon exited with ${proc.exitCode}; see ${join(setup.home, 'daemon.log')}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`daemon did not start; see ${join(setup.home, 'daemon.log')}`);
    }
    if (existsSync(file)) {
      try {
        const info = JSON.parse(readFileSync(file, 'utf8')) as { url: string; pid: number };
        if (info.pid === proc.pid) url = info.url;
      } catch {
        // being written
      }
    }
    if (!url) await sleep(25);
  }
  const token = readFileSync(join(setup.home, 'control.token'), 'utf8').trim();

  const api = controlApi(() => ({ url, token: d.token }));
  const d: DaemonProcess = {
    ...api,
    // A run that never got there says why from the daemon's own log (a CI machine cannot be asked afterwards).
    async waitFor(runId, pred, timeoutMs) {
      try {
        return await api.waitFor(runId, pred, timeoutMs);
      } catch (err) {
        throw new Error(`${(err as Error).message}\n${logLinesOf(join(setup.home, 'daemon.log'), runId)}`, { cause: err });
      }
    },
    proc,
    url,
    token,
    async kill9() {
      proc.kill('SIGKILL');
      await exited;
    },
    async stop() {
      proc.kill('SIGTERM');
      return exited;
    },
  };
  return d;
}
