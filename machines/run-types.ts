// The run machine's contracts: its input and limits, context, events, what it emits, and the
// inputs and outputs of the actors the daemon provides. Kept apart from the machine so that the
// machine file holds only states and their transitions.
import type { AttemptOutcome, AttemptSummary, InstanceStatus, RunError } from './run-rules.js';

export interface RunLimits {
  maxAttempts: number;
  bootTimeoutS: number;
  deadlineS: number;
  /** Steps in the relax ladder. */
  relaxSteps: number;
  /** Wait before searching again after the service could not be reached. */
  outageBackoffS: number;
  destroyRetryMaxDelayS: number;
  /** How long to wait for a destroyed instance to leave the list before destroying it again. */
  destroyConfirmS: number;
  /** Consecutive polls an instance may be missing from the list before it counts as lost. */
  missingPollsToLose: number;
  /**
   * Offers of one search that may turn out gone (rented by someone else meanwhile) before the run
   * searches again instead of trying the next one: gone offers do not count against max_attempts,
   * so without this budget a run whose offers keep vanishing would send creates without end.
   */
  goneOffersPerSearch: number;
}

export interface RunInput {
  runId: string;
  limits: RunLimits;
  /** ms since epoch; the run's deadline counts from here. */
  submittedAt: number;
}

export interface Candidate {
  offerId: number;
  machineId: number;
  dphTotal: number;
}

export interface CurrentAttempt {
  n: number;
  offerId: number;
  machineId: number;
  dphTotal: number;
  instanceId: number | null;
  createdAt: number | null;
  bootDeadlineAt: number | null;
  destroyRequestedAt: number | null;
  destroyFailures: number;
  retryAt: number | null;
  missingPolls: number;
  status: InstanceStatus | null;
  /** Why the instance is being destroyed; null while it is wanted. */
  ending: { outcome: AttemptOutcome; detail: string } | null;
}

export interface RunContext {
  runId: string;
  limits: RunLimits;
  deadlineAt: number;
  relaxLevel: number;
  /** n of the latest attempt started. */
  attemptCount: number;
  /** Attempts that count against max_attempts. */
  spentAttempts: number;
  candidates: Candidate[];
  /** Offers whose attempt failed for this run (bounded by max_attempts). */
  blockedOffers: number[];
  blockedMachines: number[];
  /** The most recent offers found gone (at most GONE_OFFERS_KEPT): left out of searches for a while. */
  goneOffers: number[];
  /** Gone offers since the last search returned candidates. */
  goneThisSearch: number;
  current: CurrentAttempt | null;
  /**
   * The attempt that ended last, for the event that reports it. The run's whole story lives in the
   * attempts table, not here: a snapshot stays small however many offers a run goes through.
   */
  lastEnded: AttemptSummary | null;
  searchRetryAt: number | null;
  cancelRequested: boolean;
  /** Set when the run must fail once its instance is gone (deadline reached while creating). */
  endReason: RunError | null;
  error: RunError | null;
}

export type RunEvent =
  | { type: 'ADMIT' }
  | { type: 'CANCEL' }
  /** From the shared poller: the current instance as listed, or null when the list lacks it. */
  | { type: 'POLL'; instance: InstanceStatus | null; listedAt: number };

/** Events the machine reports; the daemon writes them to the run's event log with the snapshot. */
export type RunEmitted =
  | { type: 'search.started'; relaxLevel: number }
  | { type: 'search.found'; relaxLevel: number; count: number }
  | { type: 'search.retry'; error: RunError; retryAt: number }
  | { type: 'relaxed'; level: number }
  | { type: 'attempt.started'; n: number; offerId: number; machineId: number; dphTotal: number }
  | { type: 'attempt.instance'; n: number; instanceId: number }
  | { type: 'attempt.status'; n: number; status: InstanceStatus }
  | { type: 'attempt.ended'; n: number; offerId: number; machineId: number; instanceId: number | null; outcome: AttemptOutcome; detail: string }
  | { type: 'attempt.running'; n: number; status: InstanceStatus }
  | { type: 'destroy.requested'; n: number; instanceId: number }
  | { type: 'destroy.retry'; n: number; instanceId: number; error: RunError; retryAt: number }
  | { type: 'destroy.confirmed'; n: number; instanceId: number }
  | { type: 'run.failed'; error: RunError }
  | { type: 'run.cancelled' };

// ---- actor contracts (implemented in src/daemon/run-actors.ts) ----
export interface SearchInput {
  runId: string;
  relaxLevel: number;
  blockedOffers: number[];
  blockedMachines: number[];
}
export interface SearchOutput {
  candidates: Candidate[];
}
/** Everything the attempt's journal row needs (the label is the store's: the actor derives it). */
export interface CreateInput {
  runId: string;
  n: number;
  offerId: number;
  machineId: number;
  /** The offer's billed price, $/h, disk included. */
  dphTotal: number;
}
export type CreateOutput =
  | { kind: 'created'; instanceId: number; createdAt: number }
  | { kind: 'offer_gone'; detail: string }
  | { kind: 'create_failed'; detail: string };
export interface DestroyInput {
  runId: string;
  n: number;
  instanceId: number;
}
export interface DestroyOutput {
  requestedAt: number;
}
export interface SleepInput {
  until: number;
}

