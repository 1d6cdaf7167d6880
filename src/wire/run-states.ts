// The states of a run (docs/runs.md), as the store records them and the control API and the CLI
// show them. Part of the control API's wire contract (./control-api.ts), kept apart without zod so
// that the CLI can load it in a few milliseconds.
export const RUN_STATES = [
  'queued',
  'searching',
  'creating',
  'booting',
  'rebidding',
  'running',
  'destroying',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
] as const;
export type RunState = (typeof RUN_STATES)[number];

const END_STATES = ['succeeded', 'failed', 'cancelled', 'expired'] as const satisfies readonly RunState[];
const ENDS: ReadonlySet<string> = new Set(END_STATES);

/** A run in an end state holds no instance and never moves again. */
export const isEndState = (state: string): boolean => ENDS.has(state);

/** A run stops moving on its own once it is running or has ended. */
export const isSettled = (state: string): boolean => state === 'running' || isEndState(state);
