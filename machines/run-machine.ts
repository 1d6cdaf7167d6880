// One run: search offers → create an instance → wait for it to boot and answer SSH → running,
// failing over to the next offer when an attempt ends badly, relaxing filters when nothing matches,
// and destroying every instance it made before it ends.
//
// States (docs/runs.md) and how each is left:
//   queued      ADMIT (a slot is free) → searching; CANCEL → cancelled; EXPIRE → expired
//   searching   offers → creating; none → relax and search again, or failed (expired when only the
//               budget stood in the way); outage → backoff; deadline → failed; CANCEL → cancelled
//   creating    created → booting (or destroying when cancelled/expired/deadline meanwhile); offer
//               gone or create failed → the next offer; CANCEL and EXPIRE wait for the create to settle
//   booting, rebidding, running, collecting, keeping, destroying: see run-instance-states.ts (the instance's life)
//   settle      transient: decides what follows an ended attempt
//               (a fail-over first checks the candidates left against the budget left: none
//               affordable → expired)
//   failed, cancelled, expired   final: the run holds no instance
//
// No I/O here: searching, creating, destroying, probing, bidding and waiting are invoked actors
// given by the daemon (src/daemon/runs/run-actors.ts) or by tests through `provide`. Every deadline is
// an absolute timestamp in context, because pending `after` delays are not rescheduled when a
// persisted snapshot is restored.
import { bootingState, collectingState, destroyingState, keepingState, rebiddingState, runningState } from './run-instance-states.js';
import { withCandidates } from './run-context.js';
import { failureOf, type RunError } from './run-rules.js';
import { runSetup } from './run-setup.js';
import type { CreateOutput, RunContext } from './run-types.js';

import type { SnapshotFrom } from 'xstate';

export type * from './run-types.js';

/** Bump when states or context change shape (and add a step to run-migrations.ts); stored with every snapshot. */
export const RUN_MACHINE_VERSION = 13;

const createdOf = (output: CreateOutput) => output as Extract<CreateOutput, { kind: 'created' }>;
/** The attempt's outcome when the create answered without an instance. */
const notCreated = (output: CreateOutput) => ({
  outcome: output.kind === 'offer_gone' ? ('offer_unavailable' as const) : ('create_failed' as const),
  detail: (output as Exclude<CreateOutput, { kind: 'created' }>).detail,
  at: output.at,
});
/** A create that failed; one of unknown time (not through the daemon's actors) counts as at the deadline. */
const createError = ({ context, event }: { context: RunContext; event: { error: unknown } }) => {
  const failure = failureOf(event.error);
  return { outcome: 'create_failed' as const, detail: failure.error.message, at: failure.at ?? context.deadlineAt };
};
const reasonOf = ({ event }: { event: { type: string } }) => ({ reason: (event as unknown as { reason: RunError }).reason });

export const runMachine = runSetup.createMachine({
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
    expire: null,
    searchType: input.limits.bid ? 'bid' : 'on-demand',
    error: null,
    taskRestarts: 0,
    taskExit: null,
    taskOnstart: false,
  }),
  initial: 'queued',
  states: {
    queued: {
      description: 'Accepted and stored; waits for a free slot (daemon.max_active_runs).',
      on: {
        ADMIT: 'searching',
        CANCEL: { target: 'cancelled', actions: 'requestCancel' },
        EXPIRE: { target: 'expired', actions: { type: 'failExpired', params: reasonOf } },
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
      on: {
        CANCEL: { target: 'cancelled', actions: 'requestCancel' },
        EXPIRE: { target: 'expired', actions: { type: 'failExpired', params: reasonOf } },
      },
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
              searchType: context.searchType,
            }),
            onDone: [
              {
                // Counted after this run's own exclusions, so an attempt always has a candidate.
                guard: ({ context, event }) => (withCandidates(context, event.output.candidates).candidates?.length ?? 0) > 0,
                target: '#run.creating',
                actions: [
                  { type: 'storeCandidates', params: ({ event }) => ({ candidates: event.output.candidates }) },
                  'reportFound',
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
              // Offers matched, but the rest of the budget cannot pay for any of them to boot.
              {
                guard: ({ event }) => event.output.exhausted !== undefined,
                target: '#run.expired',
                actions: { type: 'failExpired', params: ({ event }) => ({ reason: event.output.exhausted }) },
              },
              { target: '#run.failed', actions: { type: 'failNoOffers', params: ({ event }) => ({ why: event.output.noOffers }) } },
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
                  { type: 'scheduleSearchRetry', params: ({ event }) => ({ error: event.error }) },
                  { type: 'reportSearchRetry', params: ({ event }) => ({ error: event.error }) },
                ],
              },
            ],
          },
        },
        choosing: {
          description:
            'A fail-over: the candidates left from the last search are checked against what is left of the budget now, as a search checks its offers.',
          invoke: {
            src: 'affordCandidates',
            input: ({ context }) => ({ runId: context.runId, candidates: context.candidates }),
            onDone: [
              {
                guard: ({ event }) => event.output.candidates.length > 0,
                target: '#run.creating',
                actions: [
                  { type: 'keepAffordable', params: ({ event }) => ({ candidates: event.output.candidates }) },
                  'beginAttempt',
                  'reportAttemptStarted',
                ],
              },
              // Offers are left, but the rest of the budget cannot pay for any of them to boot.
              {
                guard: ({ event }) => event.output.exhausted !== undefined,
                target: '#run.expired',
                actions: { type: 'failExpired', params: ({ event }) => ({ reason: event.output.exhausted }) },
              },
              { target: 'querying' },
            ],
            // Not checked: a search checks again.
            onError: 'querying',
          },
        },
        backoff: {
          description: 'The service could not be reached even after retries; waits, then searches again.',
          invoke: {
            src: 'sleepUntil',
            input: ({ context }) => ({ until: context.searchRetryAt ?? 0 }),
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
          input: ({ context }) => ({
            runId: context.runId,
            n: context.current!.n,
            offerId: context.current!.offerId,
            machineId: context.current!.machineId,
            dphTotal: context.current!.dphTotal,
            bidPrice: context.current!.bidPrice,
            gpu: context.current!.gpu ?? null,
          }),
          onDone: [
            {
              guard: ({ event, context }) =>
                event.output.kind === 'created' && (context.cancelRequested || context.expire !== null || context.endReason !== null),
              target: 'destroying',
              actions: [
                { type: 'recordInstance', params: ({ event }) => createdOf(event.output) },
                'reportInstance',
                'markEndingForEndReason',
              ],
            },
            // Made, but stopped by the service's own account of it: recorded, then destroyed at once.
            {
              guard: ({ event }) => event.output.kind === 'created' && event.output.createdStopped !== undefined,
              target: 'destroying',
              actions: [
                { type: 'recordInstance', params: ({ event }) => createdOf(event.output) },
                'reportInstance',
                { type: 'markEndingCreatedStopped', params: ({ event }) => ({ detail: createdOf(event.output).createdStopped! }) },
              ],
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
                { type: 'endAttemptWithoutInstance', params: createError },
                'reportAttemptEnded',
                { type: 'failFatal', params: ({ event }) => ({ error: event.error }) },
              ],
            },
            {
              target: 'settle',
              actions: [{ type: 'endAttemptWithoutInstance', params: createError }, 'reportAttemptEnded'],
            },
          ],
        },
        {
          src: 'sleepUntil',
          input: ({ context }) => ({ until: context.deadlineAt }),
          onDone: { actions: 'setDeadlineReason' },
        },
      ],
      on: {
        CANCEL: { actions: 'requestCancel' },
        EXPIRE: { actions: { type: 'requestExpire', params: reasonOf } },
      },
    },

    booting: bootingState,
    rebidding: rebiddingState,
    running: runningState,
    collecting: collectingState,
    keeping: keepingState,
    destroying: destroyingState,

    settle: {
      description: 'Transient: the last attempt is over and no instance is held; decides what comes next.',
      always: [
        // A task's end that happened wins over a limit that passed later (issue #29): the daemon
        // may learn of the end late (a log read queued, a restart), and the work was done. A
        // success is one whatever came after; a failure is the run's end unless it may restart,
        // except when the user cancelled (no restart, and cancelled is what they asked for).
        { guard: 'taskSucceeded', target: 'succeeded' },
        { guard: 'cancelRequested', target: 'cancelled' },
        { guard: 'taskFailedForGood', target: 'failed', actions: 'failTask' },
        { guard: 'expireRequested', target: 'expired', actions: { type: 'failExpired', params: {} } },
        { guard: 'hasEndReason', target: 'failed', actions: 'failFromEndReason' },
        // A failed task starts again on a fresh instance while max_restarts allows (a new search:
        // its offers may be long gone).
        {
          guard: 'taskFailed',
          target: 'searching',
          actions: [
            'countRestart',
            // A fresh deadline from the task's end: the last one was met when the task got running.
            { type: 'restartDeadline', params: ({ context }) => ({ instance: null, listedAt: context.lastEnded!.endedAt }) },
          ],
        },
        { guard: 'attemptsSpent', target: 'failed', actions: 'failAttemptsSpent' },
        { guard: 'deadlinePassed', target: 'failed', actions: 'failDeadline' },
        // Offers of this search keep vanishing: it is stale, so search again (rate-limited) instead.
        { guard: 'goneBudgetSpent', target: 'searching' },
        { guard: 'hasCandidates', target: '#run.searching.choosing' },
        { target: 'searching' },
      ],
    },

    succeeded: {
      description: 'Final: the task exited with code 0 and its instance is destroyed.',
      type: 'final',
      entry: 'reportSucceeded',
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
    expired: {
      description: 'Final: max_runtime_s or budget_usd was reached; every instance it made is destroyed.',
      type: 'final',
      entry: 'reportExpired',
    },
  },
});

type TopOf<V> = V extends string ? V : keyof V & string;
/**
 * The top-level states a run can be found in: the machine's own, read off its config by the type
 * checker. `settle` is passed through within one step, so no snapshot rests there. The daemon ties
 * this type to the wire's `RunState` in both directions (src/daemon/runs/run-state.ts).
 */
export type RunMachineState = Exclude<TopOf<SnapshotFrom<typeof runMachine>['value']>, 'settle'>;
