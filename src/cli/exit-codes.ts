// The CLI's exit codes (docs/cli.md) and the one table that maps a thrown error to one of them.
// Commands throw typed errors; only main() turns them into a code, so every command agrees.
import { BerthError } from '../errors.js';
import { ControlApiError } from './control-client.js';

export const EXIT = {
  ok: 0,
  /** The run failed or was cancelled (with --wait). */
  runEnded: 1,
  /** Bad usage, invalid job spec or config, another daemon holds BERTH_HOME: nothing was done. */
  usage: 2,
  daemonUnreachable: 3,
  /** The marketplace rejected the API key or a permission. */
  serviceAuth: 4,
  /** A task's run succeeded but its outputs were not all taken (with --wait; the run's outputs_missing). */
  outputsMissing: 5,
  /** Stopped by SIGINT/SIGTERM while following a run (the shell's 128 + SIGINT). */
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export function exitCodeFor(err: unknown): ExitCode {
  if (err instanceof ControlApiError) {
    // A wrong token means this CLI cannot use the daemon; any other 4xx is fixed by changing the
    // command (an unknown run id, a spec the daemon rejects); a 5xx is the daemon's own failure.
    if (err.kind === 'unauthorized') return EXIT.daemonUnreachable;
    return err.status >= 400 && err.status < 500 ? EXIT.usage : EXIT.runEnded;
  }
  if (err instanceof BerthError) {
    switch (err.code) {
      case 'aborted':
        return EXIT.interrupted;
      case 'daemon_unreachable':
        return EXIT.daemonUnreachable;
      case 'auth':
      case 'permission':
        return EXIT.serviceAuth;
      case 'config':
      case 'store':
      case 'spec':
      case 'bad_request':
        return EXIT.usage;
      default:
        return EXIT.runEnded;
    }
  }
  return EXIT.runEnded;
}

/** Exit code once a followed run has stopped moving: running is success, an end state is not. */
export function exitCodeForRun(run: { state: string; error: { kind: string } | null }): ExitCode {
  if (run.state === 'running') return EXIT.ok;
  if (run.error?.kind === 'auth' || run.error?.kind === 'permission') return EXIT.serviceAuth;
  return EXIT.runEnded;
}

/**
 * Exit code once a task's run has ended (`submit --wait`, `logs --follow`): the task's own code when
 * it ran and exited non-zero (or its onstart did) with no restart left, as `berth ssh RUN -- CMD`
 * exits with the command's; 0 when it succeeded; otherwise (it never ran, was cancelled, expired,
 * its end is unknown) what exitCodeForRun says: 1, or 4 for the key. docs/cli.md has the table.
 */
export function exitCodeForTask(run: { state: string; error: { kind: string; exit_code?: number | undefined } | null }): number {
  if (run.state === 'succeeded') return EXIT.ok;
  const code = run.error?.kind === 'task_failed' ? run.error.exit_code : undefined;
  if (code !== undefined && Number.isInteger(code) && code >= 1 && code <= 255) return code;
  return exitCodeForRun(run);
}
