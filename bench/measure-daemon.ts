// A real `berth daemon` process for the benchmark, as a user runs it (the built CLI, its own
// process), so that its memory and CPU time are its own and can be read from /proc; plus a small
// client for its control API. Everything here talks to 127.0.0.1 only.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool } from 'undici';
import type { DeepPartial } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import { packagePath } from '../src/package-path.js';

export interface DaemonHandle {
  proc: ChildProcess;
  pid: number;
  url: string;
  token: string;
  /** Wall ms from spawn until /healthz answered 200 with ready: true (reconciled, runs resumed). */
  readyMs: number;
  api<T = unknown>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** SIGTERM, wait for the exit (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Spawns the daemon with `config` in `home` and waits until /healthz says it is ready. */
export async function spawnDaemon(
  home: string,
  simUrl: string,
  apiKey: string,
  config: DeepPartial<Config>,
  timeoutMs = 60_000,
  nodeArgs: string[] = [],
  env: Record<string, string> = {},
): Promise<DaemonHandle> {
  const configFile = join(home, 'config.json');
  writeFileSync(configFile, JSON.stringify(config));
  // Logs go straight to a file: a pipe we had to drain would slow pino's synchronous writes.
  const logFd = openSync(join(home, 'daemon.log'), 'a');
  const started = performance.now();
  const proc = spawn(process.execPath, [...nodeArgs, packagePath('bin', 'berth.js'), 'daemon', '--config', configFile], {
    env: { ...process.env, ...env, BERTH_HOME: home, BERTH_API_URL: simUrl, BERTH_API_KEY: apiKey },
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));

  // daemon.json names the process that wrote it; a previous daemon's file may still be there.
  const file = join(home, 'daemon.json');
  const deadline = Date.now() + timeoutMs;
  let url = '';
  let readyMs = 0;
  while (!readyMs) {
    if (proc.exitCode !== null) throw new Error(`daemon exited with ${proc.exitCode}; see ${join(home, 'daemon.log')}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      await exited;
      throw new Error(`daemon did not start within ${timeoutMs} ms; see ${join(home, 'daemon.log')}`);
    }
    if (!url && existsSync(file)) {
      try {
        const info = JSON.parse(readFileSync(file, 'utf8')) as { url: string; pid: number };
        if (info.pid === proc.pid) url = info.url;
      } catch {
        // being written
      }
    }
    if (url && (await healthy(url))) readyMs = performance.now() - started;
    else await sleep(5);
  }
  const token = readFileSync(join(home, 'control.token'), 'utf8').trim();
  const pool = new Pool(url, { connections: 16 });

  return {
    proc,
    pid: proc.pid!,
    url,
    token,
    readyMs,
    async api(method, path, body) {
      const res = await pool.request({
        method,
        path,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? null : JSON.stringify(body),
      });
      return { status: res.statusCode, body: (await res.body.json()) as never };
    },
    async stop(graceMs = 30_000) {
      await pool.close().catch(() => undefined);
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The daemon listens before it has reconciled; it is ready once /healthz says so (runs resumed). */
async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`);
    const body = (await res.json().catch(() => ({}))) as { ready?: boolean };
    return res.status === 200 && body.ready === true;
  } catch {
    return false;
  }
}

/** Clock ticks per second of /proc/<pid>/stat; 100 on every Linux Node supports. */
const CLK_TCK = 100;

/** CPU seconds (user + system) the process has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which may itself hold spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / CLK_TCK;
}

/** Peak (VmHWM) and current (VmRSS) resident memory of the process, in MB. */
export function memoryMb(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { peak: kb('VmHWM') / 1024, now: kb('VmRSS') / 1024 };
}
