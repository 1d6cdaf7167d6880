// `berth daemon [--config FILE] [--listen HOST:PORT] [--pretty]`: runs the daemon in the
// foreground until the first SIGINT/SIGTERM, which stops it gracefully (exit 0); a second signal
// exits at once. Startup errors (config, missing API key, another daemon) throw: main prints them.
import { setFlagsFromString } from 'node:v8';
import { startDaemon } from '../../daemon/daemon.js';
import { EXIT } from '../exit-codes.js';
import { onShutdownSignals } from '../signals.js';

export interface DaemonCommandOptions {
  config?: string;
  listen?: string;
  pretty?: boolean;
}

export async function daemonCommand(options: DaemonCommandOptions, env: NodeJS.ProcessEnv): Promise<number> {
  // A long-lived process on the user's machine: V8 collects sooner instead of growing the heap. When
  // 1,000 runs start at once this nearly halves the peak for about a third more CPU during the start
  // (npm run bench). Process-wide, so set here and not in startDaemon (tests embed the daemon).
  // `node --no-optimize-for-size bin/berth.js daemon` keeps V8's default.
  if (!process.execArgv.some((a) => a.endsWith('optimize-for-size'))) setFlagsFromString('--optimize-for-size');
  const daemon = await startDaemon({ configFile: options.config, listen: options.listen, pretty: options.pretty, env });
  await new Promise<void>((resolve) => {
    const dispose = onShutdownSignals(() => {
      // Keep the handler installed while stopping, so that a second signal still exits at once.
      daemon.stop().finally(() => {
        dispose();
        resolve();
      });
    });
  });
  return EXIT.ok;
}
