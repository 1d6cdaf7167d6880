// `berth ARGS` spawned with its stdout read as it comes: for tests that act on what the CLI has
// printed while it still runs (a live follow), proven by order, not by time.
import { spawn } from 'node:child_process';
import { packagePath } from '../../src/package-path.js';

export interface SpawnedBerth {
  readonly stdout: string;
  readonly stderr: string;
  /** The exit code (null: killed by a signal). */
  exited: Promise<number | null>;
  /** Resolves once stdout holds `text` (rejects if the process ends first, or after 60 s). */
  until(text: string): Promise<void>;
  kill(): void;
}

export function spawnBerth(args: string[], env: NodeJS.ProcessEnv): SpawnedBerth {
  const proc = spawn(process.execPath, [packagePath('bin', 'berth.js'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const waiters: Array<() => void> = [];
  proc.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
    waiters.forEach((w) => w());
  });
  proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return {
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    exited,
    until(text: string): Promise<void> {
      return new Promise((ok, fail) => {
        const check = () => {
          if (stdout.includes(text)) return ok();
          if (proc.exitCode !== null) fail(new Error(`berth ${args.join(' ')} ended before printing ${text}: ${stdout} ${stderr}`));
        };
        waiters.push(check);
        void exited.then(check);
        const timer = setTimeout(() => fail(new Error(`berth ${args.join(' ')} printed no ${text} in 60 s: ${stdout} ${stderr}`)), 60_000);
        waiters.push(() => stdout.includes(text) && clearTimeout(timer));
        check();
      });
    },
    kill: () => proc.kill('SIGKILL'),
  };
}
