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
  attemptEndedEvent,
  attemptStartedEvent,
  attemptsSpentError,
  concludeDestroyed,
  endingBootTimeout,
  endingCancelled,
  endingForEndReason,
  endingFromStatus,
  endingMissing,
  isGoneSinceDestroy,
  isLost,
  noOffersError,
  startAttempt,
  withCandidates,
  withDestroyRetry,
  withInstance,
  withRunning,
} from './run-context.js';
import {
  concludeAttempt,
  deadlineError,
  failureOfStatus,
  failsRun,
  isRunningStatus,
  sameStatus,
  type AttemptOutcome,
  toRunError as errorOf,
  type InstanceStatus,
} from './run-rules.js';
import type {
  Candidate,
  CreateInput,
  CreateOutput,
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
export const RUN_MACHINE_VERSION = 2;

/** What a POLL event says of the current instance. */
type PollParams = { instance: InstanceStatus | null; listedAt: number };

const createdOf = (output: CreateOutput) => output as Extract<CreateOutput, { kind: 'created' }>;
/** The attempt's outcome when the create answered without an instance. */
const notCreated = (output: CreateOutput) => ({
  outcome: output.kind === 'offer_gone' ? ('offer_unavailable' as const) : ('create_failed' as const),
  detail: (output as Exclude<CreateOutput, { kind: 'created' }>).detail,
});
const createError = (error: unknown) => ({ outcome: 'create_failed' as const, detail: errorOf(error).message });

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
    goneBudgetSpent: ({ context }) => context.goneThisSearch >= context.limits.goneOffersPerSearch,
    canRelax: ({ context }) => context.relaxLevel < context.limits.relaxSteps,
    isFatal: (_, params: { error: unknown }) => failsRun(params.error),
    cancelRequested: ({ context }) => context.cancelRequested,
    hasEndReason: ({ context }) => context.endReason !== null,
    attemptsSpent: ({ context }) => context.spentAttempts >= context.limits.maxAttempts,
    deadlinePassed: ({ context }) => Date.now() >= context.deadlineAt,
    statusIsRunning: (_, params: PollParams) => params.instance !== null && isRunningStatus(params.instance),
    statusIsFailure: (_, params: PollParams) => params.instance !== null && failureOfStatus(params.instance) !== null,
    instanceLost: ({ context }, params: PollParams) => isLost(context, params.instance, params.listedAt),
    goneSinceDestroy: ({ context }, params: PollParams) => isGoneSinceDestroy(context, params.instance, params.listedAt),
  },
  actions: {
    startSearch: emit(({ context }) => ({ type: 'search.started' as const, relaxLevel: context.relaxLevel })),
    storeCandidates: assign(({ context }, params: { candidates: Candidate[] }) => withCandidates(context, params.candidates)),
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
    beginAttempt: assign(({ context }) => startAttempt(context)),
    reportAttemptStarted: emit(({ context }) => attemptStartedEvent(context)),
    recordInstance: assign(({ context }, params: { instanceId: number; createdAt: number }) =>
      withInstance(context, params.instanceId, params.createdAt),
    ),
    reportInstance: emit(({ context }) => ({
      type: 'attempt.instance' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
    })),
    /** Ends the current attempt without an instance to destroy. */
    endAttemptWithoutInstance: assign(({ context }, params: { outcome: AttemptOutcome; detail: string }) =>
      concludeAttempt(context, params.outcome, params.detail),
    ),
    reportAttemptEnded: emit(({ context }) => attemptEndedEvent(context)),
    /** Marks why the current instance is being destroyed; the attempt ends once it is gone. */
    markEndingFromStatus: assign(({ context }, params: { instance: InstanceStatus | null; wasRunning: boolean }) =>
      endingFromStatus(context, params.instance!, params.wasRunning),
    ),
    markEndingMissing: assign(({ context }) => endingMissing(context)),
    markEndingCancelled: assign(({ context }) => endingCancelled(context)),
    markEndingBootTimeout: assign(({ context }) => endingBootTimeout(context, Date.now())),
    markEndingForEndReason: assign(({ context }) => endingForEndReason(context)),
    /**
     * Poll bookkeeping while the instance is wanted: counts lists that miss it, reports a changed
     * status. Assigns only when something changed, so an unchanged poll writes nothing.
     */
    notePoll: enqueueActions(({ context, enqueue }, params: PollParams) => {
      const cur = context.current!;
      if (params.instance === null) {
        if (params.listedAt > (cur.createdAt ?? 0)) enqueue.assign({ current: { ...cur, missingPolls: cur.missingPolls + 1 } });
        return;
      }
      const changed = !sameStatus(params.instance, cur.status);
      if (changed) enqueue.emit({ type: 'attempt.status', n: cur.n, status: params.instance });
      if (changed || cur.missingPolls > 0) enqueue.assign({ current: { ...cur, status: params.instance, missingPolls: 0 } });
    }),
    markRunning: assign(({ context }, params: { instance: InstanceStatus }) => withRunning(context, params.instance)),
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
    scheduleDestroyRetry: assign(({ context }) => withDestroyRetry(context, Date.now())),
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
    concludeDestroyedAttempt: assign(({ context }) => concludeDestroyed(context)),
    failFatal: assign((_, params: { error: unknown }) => ({ error: errorOf(params.error) })),
    failFromEndReason: assign(({ context }) => ({ error: context.endReason })),
    failAttemptsSpent: assign(({ context }) => ({ error: attemptsSpentError(context) })),
    failDeadline: assign(({ context }) => ({ error: deadlineError(context) })),
    failNoOffers: assign(({ context }) => ({ error: noOffersError(context) })),
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
    goneOffers: [],
    goneThisSearch: 0,
    current: null,
    lastEnded: null,
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
              blockedOffers: [...context.blockedOffers, ...context.goneOffers],
              blockedMachines: context.blockedMachines,
            }),
            onDone: [
              {
                // Counted after this run's own exclusions, so an attempt always has a candidate.
                guard: ({ context, event }) => (withCandidates(context, event.output.candidates).candidates?.length ?? 0) > 0,
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
          input: ({ context: { runId, current } }) => ({ runId, n: current!.n, offerId: current!.offerId, machineId: current!.machineId, dphTotal: current!.dphTotal }),
          onDone: [
            {
              guard: ({ event, context }) =>
                event.output.kind === 'created' && (context.cancelRequested || context.endReason !== null),
              target: 'destroying',
              actions: [{ type: 'recordInstance', params: ({ event }) => createdOf(event.output) }, 'reportInstance', 'markEndingForEndReason'],
            },
            {
              guard: ({ event }) => event.output.kind === 'created',
              target: 'booting',
              actions: [{ type: 'recordInstance', params: ({ event }) => createdOf(event.output) }, 'reportInstance'],
            },
            {
              target: 'settle',
              actions: [{ type: 'endAttemptWithoutInstance', params: ({ event }) => notCreated(event.output) }, 'reportAttemptEnded'],
            },
          ],
          onError: [
            {
              guard: { type: 'isFatal', params: ({ event }) => ({ error: event.error }) },
              target: 'failed',
              actions: [
                { type: 'endAttemptWithoutInstance', params: ({ event }) => createError(event.error) },
                'reportAttemptEnded',
                { type: 'failFatal', params: ({ event }) => ({ error: event.error }) },
              ],
            },
            {
              target: 'settle',
              actions: [{ type: 'endAttemptWithoutInstance', params: ({ event }) => createError(event.error) }, 'reportAttemptEnded'],
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
            guard: { type: 'statusIsRunning', params: ({ event }) => event },
            target: 'running',
            actions: [{ type: 'markRunning', params: ({ event }) => ({ instance: event.instance! }) }, 'reportRunning'],
          },
          {
            guard: { type: 'statusIsFailure', params: ({ event }) => event },
            target: 'destroying',
            actions: {
              type: 'markEndingFromStatus',
              params: ({ event }) => ({ instance: event.instance, wasRunning: false }),
            },
          },
          {
            guard: { type: 'instanceLost', params: ({ event }) => event },
            target: 'destroying',
            actions: 'markEndingMissing',
          },
          { actions: { type: 'notePoll', params: ({ event }) => event } },
        ],
        CANCEL: { target: 'destroying', actions: 'markEndingCancelled' },
      },
    },

    running: {
      description: 'The instance runs and SSH is available; the run keeps watching it until cancelled or lost.',
      on: {
        POLL: [
          {
            guard: { type: 'statusIsFailure', params: ({ event }) => event },
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
            guard: { type: 'instanceLost', params: ({ event }) => event },
            target: 'destroying',
            actions: ['markEndingMissing', 'restartDeadline'],
          },
          { actions: { type: 'notePoll', params: ({ event }) => event } },
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
              guard: { type: 'goneSinceDestroy', params: ({ event }) => event },
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
        // Offers of this search keep vanishing: it is stale, so search again (rate-limited) instead.
        { guard: 'goneBudgetSpent', target: 'searching' },
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
