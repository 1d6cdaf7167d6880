// `berth daemon [--config FILE] [--listen HOST:PORT] [--pretty] [--replace-store]`: runs the daemon
// in the foreground until SIGINT, SIGTERM or SIGHUP, each of which stops it gracefully (exit 0); a
// second signal exits at once. Start-up errors (config, missing API key, another daemon, a store
// that must not be opened) throw: main prints them as one sentence and exits 2.
//
// The process never ends with 0 unless it was asked to stop: the signal handlers are installed
// before anything waits, and if the event loop ever runs dry without a stop request (nothing left
// holding the process: a bug), the 'beforeExit' guard says so and exits 1, so that a supervisor
// such as systemd restarts it instead of taking it for a clean stop.
import { setFlagsFromString } from 'node:v8';
import { startDaemon } from '../../daemon/daemon.js';
import { EXIT } from '../exit-codes.js';
import { onShutdownSignals } from '../signals.js';

export interface DaemonCommandOptions {
  config?: string;
  listen?: string;
  pretty?: boolean;
  replaceStore?: boolean;
}

/** After a graceful stop, the process exits by this time even if a handle is left open. */
const EXIT_AFTER_STOP_MS = 2_000;

export async function daemonCommand(options: DaemonCommandOptions, env: NodeJS.ProcessEnv): Promise<number> {
  // A long-lived process on the user's machine: V8 collects sooner instead of growing the heap. When
  // 1,000 runs start at once this nearly halves the peak for about a third more CPU during the start
  // (npm run bench). Process-wide, so set here and not in startDaemon (tests embed the daemon).
  // `node --no-optimize-for-size bin/berth.js daemon` keeps V8's default.
  if (!process.execArgv.some((a) => a.endsWith('optimize-for-size'))) setFlagsFromString('--optimize-for-size');

  let stopAsked: (() => void) | undefined;
  const stopRequested = new Promise<void>((resolve) => (stopAsked = resolve));
  let asked = false;
  // A start still waiting for berth.db (another program holds its lock) ends at the first signal.
  const startAbort = new AbortController();
  // Keep the handler installed while stopping, so that a second signal still exits at once.
  const dispose = onShutdownSignals(() => {
    asked = true;
    startAbort.abort();
    stopAsked?.();
  }, ['SIGINT', 'SIGTERM', 'SIGHUP']);
  const guard = () => {
    if (asked) return;
    process.stderr.write(
      'berth daemon: nothing holds the process any more although no stop was asked for (a bug in berth); exiting 1 so that it is restarted.\n',
    );
    process.exit(1);
  };
  process.on('beforeExit', guard);

  try {
    let daemon: Awaited<ReturnType<typeof startDaemon>>;
    try {
      daemon = await startDaemon({
        configFile: options.config,
        listen: options.listen,
        pretty: options.pretty,
        replaceStore: options.replaceStore,
        env,
        signal: startAbort.signal,
      });
    } catch (err) {
      // Asked to stop while the start waited for berth.db: a clean stop.
      if (asked && startAbort.signal.aborted && (err as { code?: unknown }).code === 'aborted') return EXIT.ok;
      throw err;
    }
    const failure = await Promise.race([stopRequested.then(() => undefined), daemon.failed.catch((err: unknown) => err)]);
    asked = true;
    if (failure !== undefined) throw failure;
    await daemon.stop();
    setTimeout(() => process.exit(process.exitCode ?? EXIT.ok), EXIT_AFTER_STOP_MS).unref();
    return EXIT.ok;
  } finally {
    asked = true;
    process.off('beforeExit', guard);
    dispose();
  }
}
