// The run object and event as the control API serves them (SPEC section 5). The CLI only reads
// them; the daemon owns their meaning.

export const RUN_STATES = ['queued', 'searching', 'creating', 'booting', 'running', 'destroying', 'failed', 'cancelled'] as const;
export type RunState = (typeof RUN_STATES)[number];

export const END_STATES: ReadonlySet<string> = new Set(['failed', 'cancelled']);

export interface RunInstance {
  id: number;
  offer_id: number;
  machine_id: number | null;
  ssh_host: string | null;
  ssh_port: number | null;
  actual_status: string | null;
  dph_total: number | null;
}

export interface RunAttempt {
  n: number;
  offer_id: number | null;
  machine_id: number | null;
  instance_id: number | null;
  /** null while the attempt is in progress. */
  outcome: string | null;
  started_at: string;
  ended_at: string | null;
  detail: string | null;
}

export interface Run {
  id: string;
  name: string;
  state: RunState;
  created_at: string;
  updated_at: string;
  attempt: number;
  relax_level: number;
  instance: RunInstance | null;
  attempts: RunAttempt[];
  error: { kind: string; message: string } | null;
}

export interface RunEvent {
  id: number;
  at: string;
  type: string;
  message: string;
  data: unknown;
}

export const isEndState = (state: string): boolean => END_STATES.has(state);

/** A run stops moving on its own once it is running or has ended. */
export const isSettled = (state: string): boolean => state === 'running' || isEndState(state);
