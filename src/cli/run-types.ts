// The run object and event as the control API serves them (SPEC section 5). The CLI only reads
// them; the daemon owns their meaning.
import type { RunView } from '../daemon/run-view.js';

export const RUN_STATES = ['queued', 'searching', 'creating', 'booting', 'rebidding', 'running', 'destroying', 'failed', 'cancelled', 'expired'] as const;
export type RunState = (typeof RUN_STATES)[number];

export const END_STATES: ReadonlySet<string> = new Set(['failed', 'cancelled', 'expired']);

// The shapes are the daemon's own (src/daemon/run-view.ts), so the two can never drift apart.
export type Run = Omit<RunView, 'state'> & { state: RunState };
export type RunInstance = NonNullable<RunView['instance']>;
export type RunAttempt = RunView['attempts'][number];

export interface RunEvent {
  id: number;
  at: string;
  type: string;
  message: string;
  data: unknown;
  /** How many times in a row it happened (an outage's retries fold into one event); `at` is the last. */
  count?: number;
  first_at?: string | null;
}

export const isEndState = (state: string): boolean => END_STATES.has(state);

/** A run stops moving on its own once it is running or has ended. */
export const isSettled = (state: string): boolean => state === 'running' || isEndState(state);
