// One run: search offers → create an instance → wait for it to boot → running, failing over to the
// next offer when an attempt ends badly, relaxing filters when nothing matches, and destroying
// every instance it made before it ends.
//
// States (SPEC section 4) and how each is left:
//   queued      ADMIT (a slot is free) → searching; CANCEL → cancelled
//   searching   offers → creating; none → relax and search again, or failed; outage → backoff;
//               deadline → failed; CANCEL → cancelled (no instance is held)
//   creating    created → booting (or destroying when cancelled/deadline meanwhile); offer gone or
//               create failed → the next offer; CANCEL waits for the create to settle
//   booting     running → running; exited/unknown/offline/OCI failure/boot timeout/missing → destroying
//   running     lost (status or missing from the list) → destroying; CANCEL → destroying
//   destroying  destroy requested, then confirmed by absence from the list (retried forever with
//               backoff) → settle: cancelled, failed, next offer, or a new search
//   failed, cancelled   final: the run holds no instance
//
// No I/O here: searching, creating, destroying and waiting are invoked actors given by the daemon
// (src/daemon/run-actors.ts) or by tests through `provide`. Time only enters through event payloads
// and `Date.now()` in actions, and every deadline is an absolute timestamp in context, because
// pending `after` delays are not rescheduled when a persisted snapshot is restored.
import { assign, emit, enqueueActions, fromPromise, setup } from 'xstate';
import {
  concludeAttempt,
  deadlineError,
  describeAttempts,
  destroyBackoffMs,
  errorOf,
  failureOfStatus,
  isFatalError,
  isRunningStatus,
  sameStatus,
  type AttemptOutcome,
  type InstanceStatus,
  type RunError,
} from './run-rules.js';
import type {
  Candidate,
  CreateInput,
  CreateOutput,
  CurrentAttempt,
  DestroyInput,
  DestroyOutput,
  RunContext,
  RunEmitted,
  RunEvent,
  RunInput,
  SearchInput,
  SearchOutput,
  SleepInput,
} from './run-types.js';

export type * from './run-types.js';

/** Bump when states or context change shape; stored with every snapshot. */
export const RUN_MACHINE_VERSION = 1;

const missing = (name: string) =>
  fromPromise<never, unknown>(async () => {
    throw new Error(`run actor "${name}" was not provided`);
  });

export const runMachine = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    input: {} as RunInput,
    emitted: {} as RunEmitted,
  },
  actors: {
    searchOffers: missing('searchOffers') as unknown as ReturnType<typeof fromPromise<SearchOutput, SearchInput>>,
    createInstance: missing('createInstance') as unknown as ReturnType<typeof fromPromise<CreateOutput, CreateInput>>,
    destroyInstance: missing('destroyInstance') as unknown as ReturnType<typeof fromPromise<DestroyOutput, DestroyInput>>,
    sleepUntil: missing('sleepUntil') as unknown as ReturnType<typeof fromPromise<void, SleepInput>>,
  },
  guards: {
    hasCandidates: ({ context }) => context.candidates.length > 0,
    canRelax: ({ context }) => context.relaxLevel < context.limits.relaxSteps,
    isFatal: (_, params: { error: unknown }) => isFatalError(params.error),
    cancelRequested: ({ context }) => context.cancelRequested,
    mustEnd: ({ context }) => context.cancelRequested || context.endReason !== null,
    hasEndReason: ({ context }) => context.endReason !== null,
    attemptsSpent: ({ context }) => context.spentAttempts >= context.limits.maxAttempts,
    deadlinePassed: ({ context }) => Date.now() >= context.deadlineAt,
    statusIsRunning: (_, params: { instance: InstanceStatus | null }) =>
      params.instance !== null && isRunningStatus(params.instance),
    statusIsFailure: (_, params: { instance: InstanceStatus | null }) =>
      params.instance !== null && failureOfStatus(params.instance) !== null,
    instanceLost: ({ context }, params: { instance: InstanceStatus | null; listedAt: number }) => {
      const cur = context.current;
      return (
        params.instance === null &&
        cur !== null &&
        params.listedAt > (cur.createdAt ?? 0) &&
        cur.missingPolls + 1 >= context.limits.missingPollsToLose
      );
    },
    goneSinceDestroy: ({ context }, params: { instance: InstanceStatus | null; listedAt: number }) =>
      params.instance === null &&
      context.current?.destroyRequestedAt != null &&
      params.listedAt >= context.current.destroyRequestedAt,
  },
  actions: {
    startSearch: emit(({ context }) => ({ type: 'search.started' as const, relaxLevel: context.relaxLevel })),
    storeCandidates: assign(({ context }, params: { candidates: Candidate[] }) => ({
      candidates: params.candidates.filter(
        (c) => !context.blockedOffers.includes(c.offerId) && !context.blockedMachines.includes(c.machineId),
      ),
      searchRetryAt: null,
    })),
    reportFound: emit(({ context }, params: { count: number }) => ({
      type: 'search.found' as const,
      relaxLevel: context.relaxLevel,
      count: params.count,
    })),
    relax: assign({ relaxLevel: ({ context }) => context.relaxLevel + 1 }),
    reportRelaxed: emit(({ context }) => ({ type: 'relaxed' as const, level: context.relaxLevel })),
    scheduleSearchRetry: assign({
      searchRetryAt: ({ context }) => Math.min(Date.now() + context.limits.outageBackoffS * 1000, context.deadlineAt),
    }),
    reportSearchRetry: emit(({ context }, params: { error: unknown }) => ({
      type: 'search.retry' as const,
      error: errorOf(params.error),
      retryAt: context.searchRetryAt ?? Date.now(),
    })),
    beginAttempt: assign(({ context }) => {
      const [next, ...rest] = context.candidates;
      if (!next) throw new Error('beginAttempt without a candidate'); // guarded by hasCandidates
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
      return {
        attemptCount: n,
        candidates: rest,
        current,
        history: [
          ...context.history,
          { n, offerId: next.offerId, machineId: next.machineId, instanceId: null, outcome: null, detail: null },
        ],
      };
    }),
    reportAttemptStarted: emit(({ context }) => {
      const cur = context.current!;
      return {
        type: 'attempt.started' as const,
        n: cur.n,
        offerId: cur.offerId,
        machineId: cur.machineId,
        dphTotal: cur.dphTotal,
      };
    }),
    recordInstance: assign(({ context }, params: { instanceId: number; createdAt: number }) => {
      const cur = context.current!;
      const bootDeadlineAt = Math.min(params.createdAt + context.limits.bootTimeoutS * 1000, context.deadlineAt);
      return {
        current: { ...cur, instanceId: params.instanceId, createdAt: params.createdAt, bootDeadlineAt },
        history: context.history.map((a) => (a.n === cur.n ? { ...a, instanceId: params.instanceId } : a)),
      };
    }),
    reportInstance: emit(({ context }) => ({
      type: 'attempt.instance' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
    })),
    /** Ends the current attempt without an instance to destroy. */
    endAttemptWithoutInstance: assign(({ context }, params: { outcome: AttemptOutcome; detail: string }) =>
      concludeAttempt(context, params.outcome, params.detail),
    ),
    reportAttemptEnded: emit(({ context }) => {
      const last = context.history[context.history.length - 1]!;
      return {
        type: 'attempt.ended' as const,
        n: last.n,
        offerId: last.offerId,
        machineId: last.machineId,
        outcome: last.outcome!,
        detail: last.detail ?? '',
      };
    }),
    /** Marks why the current instance is being destroyed; the attempt ends once it is gone. */
    markEnding: assign(({ context }, params: { outcome: AttemptOutcome; detail: string }) => ({
      current: { ...context.current!, ending: { outcome: params.outcome, detail: params.detail } },
    })),
    markEndingFromStatus: assign(({ context }, params: { instance: InstanceStatus | null; wasRunning: boolean }) => {
      const failure = failureOfStatus(params.instance!)!;
      const ending = params.wasRunning ? { outcome: 'lost' as const, detail: failure.detail } : failure;
      return { current: { ...context.current!, status: params.instance, ending } };
    }),
    markEndingMissing: assign(({ context }) => ({
      current: {
        ...context.current!,
        ending: {
          outcome: 'lost' as const,
          detail: `instance ${context.current!.instanceId} disappeared from the instance list`,
        },
      },
    })),
    markEndingCancelled: assign(({ context }) => ({
      cancelRequested: true,
      current: {
        ...context.current!,
        ending: {
          outcome: 'cancelled' as const,
          detail: context.current!.status?.actual_status === 'running' ? 'was running; cancelled by the user' : 'cancelled by the user',
        },
      },
    })),
    markEndingBootTimeout: assign(({ context }) => {
      const cur = context.current!;
      const deadline = Date.now() >= context.deadlineAt;
      return {
        endReason: deadline ? deadlineError(context) : context.endReason,
        current: {
          ...cur,
          ending: {
            outcome: 'boot_timeout' as const,
            detail: deadline
              ? `run deadline reached while instance ${cur.instanceId} was ${cur.status?.actual_status ?? 'provisioning'}`
              : `instance ${cur.instanceId} still ${cur.status?.actual_status ?? 'provisioning'} after ${context.limits.bootTimeoutS} s`,
          },
        },
      };
    }),
    markEndingForEndReason: assign(({ context }) => ({
      current: {
        ...context.current!,
        ending: context.cancelRequested
          ? { outcome: 'cancelled' as const, detail: 'cancelled by the user while creating' }
          : { outcome: 'cancelled' as const, detail: context.endReason?.message ?? 'run ended' },
      },
    })),
    /**
     * Poll bookkeeping while the instance is wanted: counts lists that miss it, reports a changed
     * status. Assigns only when something changed, so an unchanged poll writes nothing.
     */
    notePoll: enqueueActions(({ context, enqueue }, params: { instance: InstanceStatus | null; listedAt: number }) => {
      const cur = context.current!;
      if (params.instance === null) {
        if (params.listedAt > (cur.createdAt ?? 0)) enqueue.assign({ current: { ...cur, missingPolls: cur.missingPolls + 1 } });
        return;
      }
      const changed = !sameStatus(params.instance, cur.status);
      if (changed) enqueue.emit({ type: 'attempt.status', n: cur.n, status: params.instance });
      if (changed || cur.missingPolls > 0) enqueue.assign({ current: { ...cur, status: params.instance, missingPolls: 0 } });
    }),
    markRunning: assign(({ context }, params: { instance: InstanceStatus }) => ({
      current: { ...context.current!, status: params.instance, missingPolls: 0 },
      history: context.history.map((a) =>
        a.n === context.current!.n ? { ...a, outcome: 'running' as const, detail: null } : a,
      ),
    })),
    reportRunning: emit(({ context }) => ({
      type: 'attempt.running' as const,
      n: context.current!.n,
      status: context.current!.status!,
    })),
    requestCancel: assign({ cancelRequested: true }),
    /** A lost running instance starts a new search with a fresh deadline: the old one was met. */
    restartDeadline: assign(({ context }) => ({ deadlineAt: Date.now() + context.limits.deadlineS * 1000 })),
    setDeadlineReason: assign(({ context }) => ({ endReason: deadlineError(context) })),
    destroyRequested: assign(({ context }, params: { requestedAt: number }) => ({
      current: { ...context.current!, destroyRequestedAt: params.requestedAt, retryAt: null },
    })),
    reportDestroyRequested: emit(({ context }) => ({
      type: 'destroy.requested' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
    })),
    scheduleDestroyRetry: assign(({ context }) => {
      const cur = context.current!;
      const failures = cur.destroyFailures + 1;
      return {
        current: {
          ...cur,
          destroyFailures: failures,
          retryAt: Date.now() + destroyBackoffMs(failures, context.limits.destroyRetryMaxDelayS),
        },
      };
    }),
    reportDestroyRetry: emit(({ context }, params: { error: unknown }) => ({
      type: 'destroy.retry' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      error: errorOf(params.error),
      retryAt: context.current!.retryAt!,
    })),
    reportDestroyConfirmed: emit(({ context }) => ({
      type: 'destroy.confirmed' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
    })),
    /** The instance is gone: close the attempt with the reason it was destroyed for. */
    concludeDestroyedAttempt: assign(({ context }) => {
      const ending = context.current!.ending ?? { outcome: 'lost' as const, detail: 'destroyed' };
      return concludeAttempt(context, ending.outcome, ending.detail);
    }),
    failWith: assign((_, params: { error: RunError }) => ({ error: params.error })),
    failFatal: assign((_, params: { error: unknown }) => ({ error: errorOf(params.error) })),
    failFromEndReason: assign(({ context }) => ({ error: context.endReason })),
    failAttemptsSpent: assign(({ context }) => ({
      error: {
        kind: 'attempts_exhausted',
        message: `All ${context.limits.maxAttempts} attempts failed. Tried: ${describeAttempts(context.history)}`,
      },
    })),
    failDeadline: assign(({ context }) => ({ error: deadlineError(context) })),
    failNoOffers: assign(({ context }) => ({
      error: {
        kind: 'no_offers',
        message:
          `No usable offer matched the spec after ${context.relaxLevel} relax step(s) of ${context.limits.relaxSteps}. ` +
          `Tried: ${describeAttempts(context.history)}`,
      },
    })),
    reportFailed: emit(({ context }) => ({ type: 'run.failed' as const, error: context.error! })),
    reportCancelled: emit({ type: 'run.cancelled' as const }),
  },
}).createMachine({
  id: 'run',
  context: ({ input }) => ({
    runId: input.runId,
    limits: input.limits,
    deadlineAt: input.submittedAt + input.limits.deadlineS * 1000,
    relaxLevel: 0,
    attemptCount: 0,
    spentAttempts: 0,
    candidates: [],
    blockedOffers: [],
    blockedMachines: [],
    current: null,
    history: [],
    searchRetryAt: null,
    cancelRequested: false,
    endReason: null,
    error: null,
  }),
  initial: 'queued',
  states: {
    queued: {
      description: 'Accepted and stored; waits for a free slot (daemon.max_active_runs).',
      on: {
        ADMIT: 'searching',
        CANCEL: { target: 'cancelled', actions: 'requestCancel' },
      },
    },

    searching: {
      description: 'Looks for usable offers with the current relax level; holds no instance.',
      initial: 'querying',
      invoke: {
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.deadlineAt }),
        onDone: { target: 'failed', actions: 'failDeadline' },
      },
      on: { CANCEL: { target: 'cancelled', actions: 'requestCancel' } },
      states: {
        querying: {
          description: 'One offer search in flight (rate-limited and retried by the client).',
          entry: 'startSearch',
          invoke: {
            src: 'searchOffers',
            input: ({ context }) => ({
              runId: context.runId,
              relaxLevel: context.relaxLevel,
              blockedOffers: context.blockedOffers,
              blockedMachines: context.blockedMachines,
            }),
            onDone: [
              {
                guard: ({ event }) => event.output.candidates.length > 0,
                target: '#run.creating',
                actions: [
                  { type: 'storeCandidates', params: ({ event }) => ({ candidates: event.output.candidates }) },
                  { type: 'reportFound', params: ({ event }) => ({ count: event.output.candidates.length }) },
                  'beginAttempt',
                  'reportAttemptStarted',
                ],
              },
              {
                guard: 'canRelax',
                target: 'querying',
                reenter: true,
                actions: ['relax', 'reportRelaxed'],
              },
              { target: '#run.failed', actions: 'failNoOffers' },
            ],
            onError: [
              {
                guard: { type: 'isFatal', params: ({ event }) => ({ error: event.error }) },
                target: '#run.failed',
                actions: { type: 'failFatal', params: ({ event }) => ({ error: event.error }) },
              },
              {
                target: 'backoff',
                actions: [
                  'scheduleSearchRetry',
                  { type: 'reportSearchRetry', params: ({ event }) => ({ error: event.error }) },
                ],
              },
            ],
          },
        },
        backoff: {
          description: 'The service could not be reached even after retries; waits, then searches again.',
          invoke: {
            src: 'sleepUntil',
            input: ({ context }) => ({ until: context.searchRetryAt ?? Date.now() }),
            onDone: 'querying',
          },
        },
      },
    },

    creating: {
      description:
        'One create in flight for the current attempt; its intent is journaled first, and an unknown outcome is reconciled by label.',
      invoke: [
        {
          src: 'createInstance',
          input: ({ context }) => ({ runId: context.runId, n: context.current!.n, offerId: context.current!.offerId }),
          onDone: [
            {
              guard: ({ event, context }) =>
                event.output.kind === 'created' && (context.cancelRequested || context.endReason !== null),
              target: 'destroying',
              actions: [
                {
                  type: 'recordInstance',
                  params: ({ event }) => event.output as { instanceId: number; createdAt: number },
                },
                'reportInstance',
                'markEndingForEndReason',
              ],
            },
            {
              guard: ({ event }) => event.output.kind === 'created',
              target: 'booting',
              actions: [
                {
                  type: 'recordInstance',
                  params: ({ event }) => event.output as { instanceId: number; createdAt: number },
                },
                'reportInstance',
              ],
            },
            {
              guard: ({ event }) => event.output.kind === 'offer_gone',
              target: 'settle',
              actions: [
                {
                  type: 'endAttemptWithoutInstance',
                  params: ({ event }) => ({
                    outcome: 'offer_unavailable' as const,
                    detail: (event.output as { detail: string }).detail,
                  }),
                },
                'reportAttemptEnded',
              ],
            },
            {
              target: 'settle',
              actions: [
                {
                  type: 'endAttemptWithoutInstance',
                  params: ({ event }) => ({
                    outcome: 'create_failed' as const,
                    detail: (event.output as { detail: string }).detail,
                  }),
                },
                'reportAttemptEnded',
              ],
            },
          ],
          onError: [
            {
              guard: { type: 'isFatal', params: ({ event }) => ({ error: event.error }) },
              target: 'failed',
              actions: [
                {
                  type: 'endAttemptWithoutInstance',
                  params: ({ event }) => ({ outcome: 'create_failed' as const, detail: errorOf(event.error).message }),
                },
                'reportAttemptEnded',
                { type: 'failFatal', params: ({ event }) => ({ error: event.error }) },
              ],
            },
            {
              target: 'settle',
              actions: [
                {
                  type: 'endAttemptWithoutInstance',
                  params: ({ event }) => ({ outcome: 'create_failed' as const, detail: errorOf(event.error).message }),
                },
                'reportAttemptEnded',
              ],
            },
          ],
        },
        {
          src: 'sleepUntil',
          input: ({ context }) => ({ until: context.deadlineAt }),
          onDone: { actions: 'setDeadlineReason' },
        },
      ],
      on: { CANCEL: { actions: 'requestCancel' } },
    },

    booting: {
      description: 'The instance exists; waits for the shared poller to see it running before the boot deadline.',
      invoke: {
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.current!.bootDeadlineAt! }),
        onDone: { target: 'destroying', actions: 'markEndingBootTimeout' },
      },
      on: {
        POLL: [
          {
            guard: { type: 'statusIsRunning', params: ({ event }) => ({ instance: event.instance }) },
            target: 'running',
            actions: [{ type: 'markRunning', params: ({ event }) => ({ instance: event.instance! }) }, 'reportRunning'],
          },
          {
            guard: { type: 'statusIsFailure', params: ({ event }) => ({ instance: event.instance }) },
            target: 'destroying',
            actions: {
              type: 'markEndingFromStatus',
              params: ({ event }) => ({ instance: event.instance, wasRunning: false }),
            },
          },
          {
            guard: { type: 'instanceLost', params: ({ event }) => ({ instance: event.instance, listedAt: event.listedAt }) },
            target: 'destroying',
            actions: 'markEndingMissing',
          },
          { actions: { type: 'notePoll', params: ({ event }) => ({ instance: event.instance, listedAt: event.listedAt }) } },
        ],
        CANCEL: { target: 'destroying', actions: 'markEndingCancelled' },
      },
    },

    running: {
      description: 'The instance runs and SSH is available; the run keeps watching it until cancelled or lost.',
      on: {
        POLL: [
          {
            guard: { type: 'statusIsFailure', params: ({ event }) => ({ instance: event.instance }) },
            target: 'destroying',
            actions: [
              {
                type: 'markEndingFromStatus',
                params: ({ event }) => ({ instance: event.instance, wasRunning: true }),
              },
              'restartDeadline',
            ],
          },
          {
            guard: { type: 'instanceLost', params: ({ event }) => ({ instance: event.instance, listedAt: event.listedAt }) },
            target: 'destroying',
            actions: ['markEndingMissing', 'restartDeadline'],
          },
          { actions: { type: 'notePoll', params: ({ event }) => ({ instance: event.instance, listedAt: event.listedAt }) } },
        ],
        CANCEL: { target: 'destroying', actions: 'markEndingCancelled' },
      },
    },

    destroying: {
      description: 'Removes the current instance and waits until the list no longer shows it; never gives up.',
      initial: 'requesting',
      on: { CANCEL: { actions: 'requestCancel' } },
      states: {
        requesting: {
          description: 'One destroy call in flight (idempotent; the instance may already be gone).',
          entry: 'reportDestroyRequested',
          invoke: {
            src: 'destroyInstance',
            input: ({ context }) => ({ runId: context.runId, n: context.current!.n, instanceId: context.current!.instanceId! }),
            onDone: {
              target: 'confirming',
              actions: { type: 'destroyRequested', params: ({ event }) => ({ requestedAt: event.output.requestedAt }) },
            },
            onError: {
              target: 'waiting',
              actions: ['scheduleDestroyRetry', { type: 'reportDestroyRetry', params: ({ event }) => ({ error: event.error }) }],
            },
          },
        },
        confirming: {
          description: 'Destroy accepted; waits for a list taken after it that no longer holds the instance.',
          invoke: {
            src: 'sleepUntil',
            input: ({ context }) => ({ until: context.current!.destroyRequestedAt! + context.limits.destroyConfirmS * 1000 }),
            onDone: {
              target: 'waiting',
              actions: [
                'scheduleDestroyRetry',
                {
                  type: 'reportDestroyRetry',
                  params: ({ context }) => ({
                    error: { code: 'not_confirmed', message: `instance ${context.current!.instanceId} still listed after destroy` },
                  }),
                },
              ],
            },
          },
          on: {
            POLL: {
              guard: { type: 'goneSinceDestroy', params: ({ event }) => ({ instance: event.instance, listedAt: event.listedAt }) },
              target: '#run.settle',
              actions: ['reportDestroyConfirmed', 'concludeDestroyedAttempt', 'reportAttemptEnded'],
            },
          },
        },
        waiting: {
          description: 'A destroy failed or was not confirmed; waits with backoff, then destroys again.',
          invoke: {
            src: 'sleepUntil',
            input: ({ context }) => ({ until: context.current!.retryAt ?? Date.now() }),
            onDone: 'requesting',
          },
        },
      },
    },

    settle: {
      description: 'Transient: the last attempt is over and no instance is held; decides what comes next.',
      always: [
        { guard: 'cancelRequested', target: 'cancelled' },
        { guard: 'hasEndReason', target: 'failed', actions: 'failFromEndReason' },
        { guard: 'attemptsSpent', target: 'failed', actions: 'failAttemptsSpent' },
        { guard: 'deadlinePassed', target: 'failed', actions: 'failDeadline' },
        { guard: 'hasCandidates', target: 'creating', actions: ['beginAttempt', 'reportAttemptStarted'] },
        { target: 'searching' },
      ],
    },

    failed: {
      description: 'Final: the run could not be satisfied; `error` lists every offer tried and why it failed.',
      type: 'final',
      entry: 'reportFailed',
    },
    cancelled: {
      description: 'Final: cancelled by the user; every instance it made is destroyed.',
      type: 'final',
      entry: 'reportCancelled',
    },
  },
});

export type RunMachine = typeof runMachine;
