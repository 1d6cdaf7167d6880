// The CLI's exit codes (SPEC section 2) and the one table that maps a thrown error to one of them.
// Commands throw typed errors; only main() turns them into a code, so every command agrees.
import { BerthError, SpecError } from '../errors.js';
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
  /** Stopped by SIGINT/SIGTERM while following a run (the shell's 128 + SIGINT). */
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Control API error kinds the user fixes by changing the command (wrong run id, bad body). */
const USAGE_KINDS = new Set(['spec', 'not_found', 'bad_request', 'conflict']);

export function exitCodeFor(err: unknown): ExitCode {
  if (err instanceof SpecError) return EXIT.usage;
  if (err instanceof ControlApiError) {
    if (err.kind === 'unauthorized') return EXIT.daemonUnreachable;
    return USAGE_KINDS.has(err.kind) ? EXIT.usage : EXIT.runEnded;
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
