// `berth daemon [--config FILE] [--listen HOST:PORT] [--pretty]`: runs the daemon in the
// foreground until the first SIGINT/SIGTERM, which stops it gracefully (exit 0); a second signal
// exits at once. Startup errors (config, missing API key, another daemon) throw: main prints them.
import { startDaemon } from '../../daemon/daemon.js';
import { EXIT } from '../exit-codes.js';
import { onShutdownSignals } from '../signals.js';

export interface DaemonCommandOptions {
  config?: string;
  listen?: string;
  pretty?: boolean;
}

export async function daemonCommand(options: DaemonCommandOptions, env: NodeJS.ProcessEnv): Promise<number> {
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
