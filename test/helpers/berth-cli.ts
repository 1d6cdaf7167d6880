// The built `berth` as a user runs it, for tests about a process's life: spawn a command and get
// its exit code and output, or start `berth daemon` and keep hold of it (signals, exit codes,
// files it leaves). Nothing of the test's own BERTH_* environment leaks in.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packagePath } from '../../src/package-path.js';

const BIN = packagePath('bin', 'berth.js');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The environment of a user whose berth lives in `home`. */
export function userEnv(home: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BERTH_')));
  // Never the real service: a command that reads it without being pointed at a simulator (validate's
  // GPU-name list) finds a closed port on this machine and says so, instead of leaving the machine.
  return { ...env, BERTH_HOME: home, BERTH_API_URL: 'http://127.0.0.1:9', ...extra };
}

/** Runs `berth ARGS` to its end (killed after `timeoutMs`, which fails the test). */
export function berth(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 20_000, shellPrefix?: string): Promise<CliResult> {
  return runBerth(args, env, { timeoutMs, shellPrefix });
}

/**
 * Runs `berth ARGS` until its stdout matches `until`, lets it run on for `graceMs`, then presses
 * Ctrl-C (SIGINT) and waits for its end: a command that stays until interrupted (`status --watch`).
 * `interrupted` says whether it was still running to be interrupted (false: it ended by itself).
 */
export function berthUntilInterrupted(
  args: string[],
  env: NodeJS.ProcessEnv,
  until: RegExp,
  graceMs = 1_500,
  timeoutMs = 20_000,
): Promise<CliResult & { interrupted: boolean }> {
  return runBerth(args, env, { timeoutMs, interruptOn: until, graceMs }) as Promise<CliResult & { interrupted: boolean }>;
}

function runBerth(
  args: string[],
  env: NodeJS.ProcessEnv,
  options: { timeoutMs: number; shellPrefix?: string | undefined; interruptOn?: RegExp; graceMs?: number },
): Promise<CliResult & { interrupted?: boolean }> {
  const { timeoutMs, shellPrefix, interruptOn, graceMs = 0 } = options;
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const proc = shellPrefix
      ? spawn('/bin/sh', ['-c', `${shellPrefix}; exec "$0" "$@"`, process.execPath, BIN, ...args], {
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        })
      : spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let matched = false;
    let interrupted = false;
    proc.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      if (!interruptOn || matched || !interruptOn.test(stdout)) return;
      matched = true;
      setTimeout(() => {
        if (proc.exitCode !== null || proc.signalCode !== null) return;
        interrupted = true;
        proc.kill('SIGINT');
      }, graceMs);
    });
    proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`berth ${args.join(' ')} took over ${timeoutMs} ms; stdout: ${stdout}; stderr: ${stderr}`));
    }, timeoutMs);
    proc.on('error', reject);
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started, ...(interruptOn ? { interrupted } : {}) });
    });
  });
}

export interface DaemonChild {
  proc: ChildProcess;
  /** Everything it wrote so far (stdout and stderr). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Waits until daemon.json names this process; returns its url. Fails if the process exits first. */
  listening(timeoutMs?: number): Promise<string>;
  /** Sends `signal` and waits for the exit; resolves with the code and how long it took. */
  signal(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
  kill(): Promise<void>;
}

/** Starts `berth daemon` with a config file written beside `home` (it keeps running until stopped). */
export function startDaemonProcess(home: string, env: NodeJS.ProcessEnv, config: unknown, extraArgs: string[] = []): DaemonChild {
  const configFile = `${home}.config.json`;
  writeFileSync(configFile, JSON.stringify(config), { mode: 0o600 });
  const proc = spawn(process.execPath, [BIN, 'daemon', '--config', configFile, ...extraArgs], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const child: DaemonChild = {
    proc,
    output: () => out,
    exited,
    async listening(timeoutMs = 15_000) {
      const file = join(home, 'daemon.json');
      const until = Date.now() + timeoutMs;
      for (;;) {
        if (proc.exitCode !== null || proc.signalCode !== null)
          throw new Error(`daemon exited (${proc.exitCode ?? proc.signalCode}): ${out}`);
        if (Date.now() > until) throw new Error(`daemon did not listen within ${timeoutMs} ms: ${out}`);
        if (existsSync(file)) {
          try {
            const info = JSON.parse(readFileSync(file, 'utf8')) as { url: string; pid: number };
            if (info.pid === proc.pid) return info.url;
          } catch {
            // being written
          }
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async signal(signal) {
      const started = Date.now();
      proc.kill(signal);
      const r = await exited;
      return { ...r, ms: Date.now() - started };
    },
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
  return child;
}

/** A config for daemons in these tests: a free port, fast polls and retries. */
export const QUICK_DAEMON = {
  daemon: { listen: '127.0.0.1:0' },
  polling: { interval_s: 0.2 },
  retry: { max_retry_time_s: 1, min_delay_s: 0.05, max_delay_s: 0.2, factor: 2 },
  runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1 },
};
