// The one source of time for berth's own code: the limiter, the poller, the supervisor's retries,
// the machine quarantine and the run actors take a Clock instead of calling Date.now() and
// setTimeout themselves, so unit tests drive them with a fake clock and assert exact schedules
// instead of sleeping (test/helpers/fake-clock.ts).
//
// Waits of any length work: setTimeout fires at once for delays past 2^31-1 ms (24.8 days), which
// once failed runs whose deadline_s was that long, so longer waits are chained here.
import { BerthError } from './errors.js';

/** A pending timer; cancelling one that already fired does nothing. */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin, never stepped (CLOCK_MONOTONIC): for a length of time
   * that a step of the wall clock (NTP, an operator) must not change, such as a lease's.
   */
  monotonic(): number;
  /** Calls `fn` once after `ms` (any length). Timers keep the process alive. */
  setTimer(fn: () => void, ms: number): Timer;
  /** Resolves after `ms`; rejects with BerthError('aborted') as soon as `signal` fires. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Resolves once `now() >= at`. */
  sleepUntil(at: number, signal?: AbortSignal): Promise<void>;
}

/** The longest delay setTimeout honours. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

function abortedError(reason: unknown): BerthError {
  return new BerthError('aborted', 'The wait was cancelled.', { cause: reason });
}

/**
 * sleep and sleepUntil for any clock, built on its `now` and `setTimer`. A wait re-arms itself
 * until `now()` has reached its end, so a timer that fires early (chained long waits, or a clock
 * that jumps) never ends it early.
 */
export function sleepFns(clock: Pick<Clock, 'now' | 'setTimer'>): Pick<Clock, 'sleep' | 'sleepUntil'> {
  const sleepUntil = (at: number, signal?: AbortSignal): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(abortedError(signal.reason));
      let timer: Timer | undefined;
      const onAbort = () => {
        timer?.cancel();
        reject(abortedError(signal?.reason));
      };
      const arm = () => {
        const left = at - clock.now();
        if (left <= 0) {
          signal?.removeEventListener('abort', onAbort);
          return resolve();
        }
        timer = clock.setTimer(arm, left);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      arm();
    });
  return {
    sleepUntil,
    sleep: (ms, signal) => sleepUntil(clock.now() + Math.max(0, ms), signal),
  };
}

function systemTimer(fn: () => void, ms: number): Timer {
  let handle: NodeJS.Timeout;
  let cancelled = false;
  const arm = (left: number) => {
    handle = setTimeout(
      () => {
        if (cancelled) return;
        if (left > MAX_TIMER_MS) arm(left - MAX_TIMER_MS);
        else fn();
      },
      Math.min(Math.max(0, left), MAX_TIMER_MS),
    );
  };
  arm(ms);
  return {
    cancel() {
      cancelled = true;
      clearTimeout(handle);
    },
  };
}

/** The wall clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimer: systemTimer,
  ...sleepFns({ now: () => Date.now(), setTimer: systemTimer }),
};
