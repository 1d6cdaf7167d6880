// How the run machine's context changes: each function takes the context (and what the action
// knows) and returns the fields that change, or builds an emitted event from it. The machine's
// named actions are one-line wrappers around these, so run-machine.ts reads as states and
// transitions. Pure: the clock comes in as `now`.
import {
  concludeAttempt,
  deadlineError,
  destroyBackoffMs,
  failureOfStatus,
  type AttemptOutcome,
  type InstanceStatus,
  type RunError,
} from './run-rules.js';
import type { Candidate, CurrentAttempt, RunContext, RunEmitted } from './run-types.js';

type Change = Partial<RunContext>;
type Ending = NonNullable<CurrentAttempt['ending']>;

/** The new candidates, minus every offer and machine this run has already blocked. */
export function withCandidates(context: RunContext, candidates: Candidate[]): Change {
  return {
    candidates: candidates.filter(
      (c) =>
        !context.blockedOffers.includes(c.offerId) &&
        !context.goneOffers.includes(c.offerId) &&
        !context.blockedMachines.includes(c.machineId),
    ),
    goneThisSearch: 0,
    searchRetryAt: null,
  };
}

/** Takes the first candidate as the next attempt. */
export function startAttempt(context: RunContext): Change {
  const [next, ...rest] = context.candidates;
  if (!next) throw new Error('startAttempt without a candidate'); // guarded by hasCandidates
  const n = context.attemptCount + 1;
  const current: CurrentAttempt = {
    n,
    offerId: next.offerId,
    machineId: next.machineId,
    dphTotal: next.dphTotal,
    instanceId: null,
    createdAt: null,
    bootDeadlineAt: null,
    destroyRequestedAt: null,
    destroyFailures: 0,
    retryAt: null,
    missingPolls: 0,
    status: null,
    ending: null,
  };
  return { attemptCount: n, candidates: rest, current };
}

/** The create succeeded: the attempt owns this instance and must see it running by its boot deadline. */
export function withInstance(context: RunContext, instanceId: number, createdAt: number): Change {
  const cur = context.current!;
  const bootDeadlineAt = Math.min(createdAt + context.limits.bootTimeoutS * 1000, context.deadlineAt);
  return { current: { ...cur, instanceId, createdAt, bootDeadlineAt } };
}

export function withRunning(context: RunContext, instance: InstanceStatus): Change {
  return { current: { ...context.current!, status: instance, missingPolls: 0 } };
}

function withEnding(context: RunContext, ending: Ending, change: Change = {}): Change {
  return { ...change, current: { ...context.current!, ...change.current, ending } };
}

/** Why the current instance is destroyed; the attempt ends with it once the instance is gone. */
export function endingAs(context: RunContext, outcome: AttemptOutcome, detail: string): Change {
  return withEnding(context, { outcome, detail });
}

/** A failed status; a running instance that fails counts as lost. */
export function endingFromStatus(context: RunContext, instance: InstanceStatus, wasRunning: boolean): Change {
  const failure = failureOfStatus(instance)!;
  const ending = wasRunning ? { outcome: 'lost' as const, detail: failure.detail } : failure;
  return withEnding(context, ending, { current: { ...context.current!, status: instance } });
}

export function endingMissing(context: RunContext): Change {
  return endingAs(context, 'lost', `instance ${context.current!.instanceId} disappeared from the instance list`);
}

export function endingCancelled(context: RunContext): Change {
  const wasRunning = context.current!.status?.actual_status === 'running';
  return withEnding(
    context,
    { outcome: 'cancelled', detail: wasRunning ? 'was running; cancelled by the user' : 'cancelled by the user' },
    { cancelRequested: true },
  );
}

/** The boot deadline passed; when the run's own deadline passed too, the run fails after the destroy. */
export function endingBootTimeout(context: RunContext, now: number): Change {
  const cur = context.current!;
  const seen = cur.status?.actual_status ?? 'provisioning';
  const deadline = now >= context.deadlineAt;
  return withEnding(
    context,
    {
      outcome: 'boot_timeout',
      detail: deadline
        ? `run deadline reached while instance ${cur.instanceId} was ${seen}`
        : `instance ${cur.instanceId} still ${seen} after ${context.limits.bootTimeoutS} s`,
    },
    { endReason: deadline ? deadlineError(context) : context.endReason },
  );
}

/** The create finished after a cancel or the deadline: the new instance goes at once. */
export function endingForEndReason(context: RunContext): Change {
  const detail = context.cancelRequested ? 'cancelled by the user while creating' : (context.endReason?.message ?? 'run ended');
  return endingAs(context, 'cancelled', detail);
}

export function withDestroyRetry(context: RunContext, now: number): Change {
  const cur = context.current!;
  const failures = cur.destroyFailures + 1;
  return {
    current: { ...cur, destroyFailures: failures, retryAt: now + destroyBackoffMs(failures, context.limits.destroyRetryMaxDelayS) },
  };
}

/** The instance is gone: close the attempt with the reason it was destroyed for. */
export function concludeDestroyed(context: RunContext): Change {
  const ending = context.current!.ending ?? { outcome: 'lost' as const, detail: 'destroyed' };
  return concludeAttempt(context, ending.outcome, ending.detail);
}

/** A list taken after the instance was made no longer shows it, often enough to call it lost. */
export function isLost(context: RunContext, instance: InstanceStatus | null, listedAt: number): boolean {
  const cur = context.current;
  return (
    instance === null &&
    cur !== null &&
    listedAt > (cur.createdAt ?? 0) &&
    cur.missingPolls + 1 >= context.limits.missingPollsToLose
  );
}

/** A list taken after the destroy was accepted no longer shows the instance. */
export function isGoneSinceDestroy(context: RunContext, instance: InstanceStatus | null, listedAt: number): boolean {
  const requestedAt = context.current?.destroyRequestedAt;
  return instance === null && requestedAt != null && listedAt >= requestedAt;
}

export function attemptsSpentError(context: RunContext): RunError {
  return { kind: 'attempts_exhausted', message: `All ${context.limits.maxAttempts} attempts failed.` };
}

export function noOffersError(context: RunContext): RunError {
  return {
    kind: 'no_offers',
    message: `No usable offer matched the spec after ${context.relaxLevel} relax step(s) of ${context.limits.relaxSteps}.`,
  };
}

export function attemptStartedEvent(context: RunContext): Extract<RunEmitted, { type: 'attempt.started' }> {
  const cur = context.current!;
  return { type: 'attempt.started', n: cur.n, offerId: cur.offerId, machineId: cur.machineId, dphTotal: cur.dphTotal };
}

export function attemptEndedEvent(context: RunContext): Extract<RunEmitted, { type: 'attempt.ended' }> {
  const last = context.lastEnded!;
  return {
    type: 'attempt.ended',
    n: last.n,
    offerId: last.offerId,
    machineId: last.machineId,
    instanceId: last.instanceId,
    outcome: last.outcome!,
    detail: last.detail ?? '',
  };
}
