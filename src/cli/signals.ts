// SIGINT/SIGTERM for long-running commands: the first asks for a graceful stop, a second one
// exits at once (a stop that hangs must never trap the user).
import { constants } from 'node:os';

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;
export type ShutdownSignal = (typeof SIGNALS)[number] | 'SIGHUP';

/** Calls `onFirst` on the first signal; exits with 128+signo on the second. Returns a disposer. */
export function onShutdownSignals(onFirst: (signal: ShutdownSignal) => void, signals: readonly ShutdownSignal[] = SIGNALS): () => void {
  let received = false;
  const handler = (signal: ShutdownSignal) => {
    if (received) process.exit(128 + constants.signals[signal]);
    received = true;
    onFirst(signal);
  };
  for (const s of signals) process.on(s, handler);
  return () => {
    for (const s of signals) process.off(s, handler);
  };
}

/** An AbortSignal fired by the first SIGINT/SIGTERM, for commands that follow a run. */
export function abortOnSignals(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const dispose = onShutdownSignals(() => controller.abort());
  return { signal: controller.signal, dispose };
}
