// Cancellation helpers: every wait in the client (limiter queue, 429 pause, retry delay) gives up
// as soon as the caller's signal fires, with one typed error.
import { BerthError } from '../errors.js';

export function abortedError(cause?: unknown): BerthError {
  return new BerthError('aborted', 'The call was cancelled.', { cause });
}

/** True for the errors undici, p-retry and AbortSignal raise on abort. */
export function isAbortError(err: unknown): boolean {
  return (
    (err instanceof BerthError && err.code === 'aborted') ||
    (err instanceof Error && (err.name === 'AbortError' || (err as { code?: unknown }).code === 'UND_ERR_ABORTED'))
  );
}

/** Settles with `promise`, or rejects with an aborted error as soon as `signal` fires. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(abortedError(signal.reason));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortedError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
