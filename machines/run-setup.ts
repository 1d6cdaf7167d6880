// The run machine's vocabulary: its types, the actors the daemon provides, and every named guard and
// action, declared once with xstate's `setup`. The states that use them are in run-machine.ts (the
// run's life) and run-instance-states.ts (the life of the instance an attempt holds).
//
// No I/O and no clock here. Time enters only with what the machine is told: a list's `listedAt`, an
// actor's output (`at`, `createdAt`, `requestedAt`) or failure (`at`), so the daemon's injected clock
// is the only one and a test drives time by what it sends.
import { assign, emit, enqueueActions, fromPromise, raise, setup } from 'xstate';
import {
  attemptEndedEvent,
  attemptStartedEvent,
  attemptsSpentError,
  concludeDestroyed,
  endingBootTimeout,
  endingCancelled,
  endingExpired,
  endingForEndReason,
  endingFromStatus,
  endingPriceOverCap,
  endingMissing,
  endingCreatedStopped,
  endingNotRunning,
  endingOutbid,
  endingUnreachable,
  endingTask,
  endingWorkdirMissing,
  endingTaskUnread,
  isGoneSinceDestroy,
  isLost,
  noOffersError,
  startAttempt,
  taskFailedError,
  withBidRaised,
  withCandidates,
  withDestroyRetry,
  withInstance,
  withProbing,
  withRestartedBoot,
  withRunning,
  withTaskChecked,
} from './run-context.js';
import {
  concludeAttempt,
  deadlineError,
  failureOf,
  failureOfStatus,
  isOutbid,
  priceOverCap,
  isRunningStatus,
  mayBeTaskEnd,
  nextBid,
  sameEndpoints,
  sameStatus,
  sshEndpoints,
  STOPPED_BLIP_MS,
  statusSince,
  stoppedByTask,
  notRunningYet,
  unaskedStop,
  type AttemptOutcome,
  type InstanceStatus,
  type RunError,
} from './run-rules.js';
import type {
  AffordInput,
  BootDeadlineInput,
  BootDeadlineOutput,
  Candidate,
  LastLook,
  LoginInput,
  LoginOutput,
  ChangeBidInput,
  CollectInput,
  CollectOutput,
  CreateInput,
  CreateOutput,
  DestroyInput,
  DestroyOutput,
  Endpoint,
  ProbeInput,
  ProbeOutput,
  RunContext,
  RunEmitted,
  RunEvent,
  RunInput,
  SearchInput,
  SearchOutput,
  SleepInput,
  SleepOutput,
  TaskEndInput,
  TaskEndOutput,
} from './run-types.js';

/** What a POLL event says of the current instance. */
export type PollParams = { instance: InstanceStatus | null; listedAt: number };
/** When the event that triggers an action happened, ms since epoch. */
type At = { at: number };
/** A task's end as its marker says it. */
type TaskEndCode = { exitCode: number; onstart: boolean };

/**
 * A failed task's end (given, else the one recorded) that ends the run (no restart left, no limit,
 * cancel or end reason meanwhile) keeps its instance for SSH (keep_on_failure_s, issue #50), unless
 * the last list shows it stopped (no sshd to enter).
 */
function keepsFailure(context: RunContext, end: TaskEndCode | undefined): boolean {
  const failed = end ? end.exitCode !== 0 || end.onstart : context.current?.ending?.outcome === 'task_failed';
  return (
    (context.limits.keepOnFailureS ?? 0) > 0 &&
    failed &&
    context.taskRestarts >= context.limits.maxRestarts &&
    !context.cancelRequested &&
    context.expire === null &&
    context.endReason === null &&
    context.current?.status?.actual_status !== 'stopped'
  );
}

const missing = <T, I>(name: string) =>
  fromPromise<T, I>(async () => {
    throw new Error(`run actor "${name}" was not provided`);
  });

/** How long an instance its task stopped may take to start again before its outputs are taken, s (limits without stoppedKeepS). */
const STOPPED_START_S = 180;

export const runSetup = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    input: {} as RunInput,
    emitted: {} as RunEmitted,
  },
  actors: {
    searchOffers: missing<SearchOutput, SearchInput>('searchOffers'),
    affordCandidates: missing<SearchOutput, AffordInput>('affordCandidates'),
    createInstance: missing<CreateOutput, CreateInput>('createInstance'),
    destroyInstance: missing<DestroyOutput, DestroyInput>('destroyInstance'),
    sleepUntil: missing<SleepOutput, SleepInput>('sleepUntil'),
    bootDeadline: missing<BootDeadlineOutput, BootDeadlineInput>('bootDeadline'),
    probeSsh: missing<ProbeOutput, ProbeInput>('probeSsh'),
    loginSsh: missing<LoginOutput, LoginInput>('loginSsh'),
    changeBid: missing<void, ChangeBidInput>('changeBid'),
    readTaskEnd: missing<TaskEndOutput, TaskEndInput>('readTaskEnd'),
    collectOutputs: missing<CollectOutput, CollectInput>('collectOutputs'),
  },
  guards: {
    hasCandidates: ({ context }) => context.candidates.length > 0,
    canRelax: ({ context }) => context.relaxLevel < context.limits.relaxSteps,
    isFatal: (_, params: { error: unknown }) => failureOf(params.error).fatal,
    cancelRequested: ({ context }) => context.cancelRequested,
    expireRequested: ({ context }) => context.expire !== null,
    hasEndReason: ({ context }) => context.endReason !== null,
    attemptsSpent: ({ context }) => context.spentAttempts >= context.limits.maxAttempts,
    /** Judged in `settle`, right after an attempt ended: by when it ended. */
    deadlinePassed: ({ context }) => context.lastEnded !== null && context.lastEnded.endedAt >= context.deadlineAt,
    goneBudgetSpent: ({ context }) => context.goneThisSearch >= context.limits.goneOffersPerSearch,
    statusIsRunning: (_, params: PollParams) => params.instance !== null && isRunningStatus(params.instance),
    statusIsFailure: (_, params: PollParams) => params.instance !== null && failureOfStatus(params.instance) !== null,
    /**
     * The same while booting, but a stop berth did not ask for is not a loss until it has lasted
     * STOPPED_BLIP_MS (a benign early `stopped`, run-rules.ts); the boot deadline bounds it too.
     */
    bootStatusIsFailure: ({ context }, params: PollParams) =>
      params.instance !== null &&
      failureOfStatus(params.instance) !== null &&
      !(
        unaskedStop(params.instance) && params.listedAt - statusSince(context.current!, params.instance, params.listedAt) < STOPPED_BLIP_MS
      ),
    /** After it ran, listed neither running nor failed (frozen, restarting, a new value ...) for as long as a boot may take. */
    notRunningTooLong: ({ context }, params: PollParams) =>
      params.instance !== null &&
      notRunningYet(params.instance) &&
      params.listedAt - statusSince(context.current!, params.instance, params.listedAt) >= context.limits.bootTimeoutS * 1000,
    /** Listed above max_price_per_hour: a host raised the price of the running contract. */
    priceOverCap: ({ context }, params: PollParams) =>
      params.instance !== null && priceOverCap(params.instance, context.limits.maxPricePerHour),
    instanceLost: ({ context }, params: PollParams) => isLost(context, params.instance, params.listedAt),
    goneSinceDestroy: ({ context }, params: PollParams) => isGoneSinceDestroy(context, params.instance, params.listedAt),
    handedToWarm: (_, params: { output: DestroyOutput }) => params.output.handed !== undefined,
    /** Running, and the spec counts that as ready (ready_when "status"). */
    runningReadyByStatus: ({ context }, params: PollParams) =>
      params.instance !== null && isRunningStatus(params.instance) && context.limits.readyWhen === 'status',
    /**
     * Probing SSH of a run that is now ready by status: a task restored from before its plan made it
     * so (issue #37). Its list showed it running when probing began, so SSH never ends it.
     */
    probingReadyByStatus: ({ context }) => context.limits.readyWhen === 'status',
    /** Running, but no longer at the SSH endpoints being probed (the service moved a port). */
    runningElsewhere: ({ context }, params: PollParams) =>
      params.instance !== null &&
      isRunningStatus(params.instance) &&
      !sameEndpoints(sshEndpoints(params.instance), sshEndpoints(context.current!.status)),
    isOutbid: ({ context }, params: PollParams) => params.instance !== null && isOutbid(params.instance, context.current!),
    /** Outbid, on_outbid "rebid", and the cap leaves room for a higher bid. */
    outbidToRebid: ({ context }, params: PollParams) =>
      params.instance !== null &&
      isOutbid(params.instance, context.current!) &&
      context.limits.bid?.onOutbid === 'rebid' &&
      nextBid(context.limits, context.current!) !== null,
    /** Outbid, on_outbid "on_demand": fail over to on-demand offers under the same cap. */
    outbidToOnDemand: ({ context }, params: PollParams) =>
      params.instance !== null && isOutbid(params.instance, context.current!) && context.limits.bid?.onOutbid === 'on_demand',
    /** The boot deadline's last look showed the instance running and SSH answered. */
    lookAnswersSsh: (_, params: { look: LastLook | null }) =>
      params.look?.instance != null && isRunningStatus(params.look.instance) && (params.look.reachable?.length ?? 0) > 0,
    /** The boot deadline's last look showed the instance running, and the spec counts that as ready. */
    /** At the boot deadline, a task's run not yet read whose last look did not show it running. */
    taskEndUnseenAtDeadline: ({ context }, params: { look: LastLook | null }) =>
      context.limits.task && !context.current!.taskChecked && !(params.look?.instance != null && isRunningStatus(params.look.instance)),
    lookReadyByStatus: ({ context }, params: { look: LastLook | null }) =>
      params.look?.instance != null && isRunningStatus(params.look.instance) && context.limits.readyWhen === 'status',
    canRaiseBid: ({ context }) => nextBid(context.limits, context.current!) !== null,
    /** Started again after a rebid (no longer stopped). */
    restarted: (_, params: PollParams) => params.instance !== null && params.instance.actual_status !== 'stopped',
    // Only once a list has shown the instance: its running event and record carry that status.
    readyForCurrent: ({ context }, params: { n: number }) => context.current?.n === params.n && context.current.status != null,
    /** A task run whose instance a list shows stopped or exited, and whose log was not read since it stopped. */
    taskMayHaveEnded: ({ context }, params: PollParams) =>
      context.limits.task && params.instance !== null && !context.current!.taskChecked && mayBeTaskEnd(params.instance),
    taskSucceeded: ({ context }) => context.lastEnded?.outcome === 'succeeded',
    /** A failed task that is the run's end: no restart left, or a limit was reached meanwhile. */
    taskFailedForGood: ({ context }) =>
      context.lastEnded?.outcome === 'task_failed' &&
      (context.taskRestarts >= context.limits.maxRestarts || context.expire !== null || context.endReason !== null),
    isTaskRun: ({ context }) => context.limits.task,
    /** No log of an instance its task stopped could be read: its exit code is unknown. */
    taskEndUnread: ({ context }, params: { unread: boolean }) => params.unread && stoppedByTask(context.current!.status),
    /** The probe's end marker is of the attempt that holds the instance now. */
    taskEndOfCurrent: ({ context }, params: { n: number; collects?: boolean; keeps?: TaskEndCode }) =>
      context.limits.task &&
      context.current?.n === params.n &&
      context.current.instanceId !== null &&
      context.current.ending === null &&
      // `collects`: only when the task leaves outputs to take first.
      (params.collects !== true || context.limits.outputs === true) &&
      // `keeps`: only when that end keeps its instance (keep_on_failure_s).
      (params.keeps === undefined || keepsFailure(context, params.keeps)),
    /** The end marker of the current attempt says its workdir never arrived (`stage=workdir`). */
    workdirMissingOfCurrent: ({ context }, params: { n: number; workdir: boolean }) =>
      params.workdir &&
      context.limits.task &&
      context.current?.n === params.n &&
      context.current.instanceId !== null &&
      context.current.ending === null,
    taskFailed: ({ context }) => context.lastEnded?.outcome === 'task_failed',
    /** The task leaves outputs to take before its instance goes (the spec's `outputs`). */
    collectsOutputs: ({ context }) => context.limits.outputs === true,
    /**
     * A cancel of a task with outputs takes them first (issue #48), unless it says not to (`now`:
     * `--no-outputs`, a second cancel) or carries no time (carried again from the store: judged
     * where the run stands, never a reason to start a collection without a deadline).
     */
    cancelTakesOutputs: ({ context }, params: { at?: number | undefined; now?: boolean | undefined }) =>
      context.limits.outputs === true && params.now !== true && params.at !== undefined,
    /** A limit reached on a task with outputs whose log shows no end: the task is stopped and its outputs taken. */
    expireTakesOutputs: ({ context }) => context.expire !== null && context.limits.outputs === true,
    /** A host's price over the cap on a task with outputs: taken before the fail-over. */
    priceOverCapTakingOutputs: ({ context }, params: PollParams) =>
      context.limits.outputs === true && params.instance !== null && priceOverCap(params.instance, context.limits.maxPricePerHour),
    /** No limit had been reached before this one (the money guard tells once; a replay is not news). */
    firstExpire: ({ context }) => context.expire === null,
    /**
     * A failed task's end (given by `params`, else the one recorded) that ends the run (no restart
     * left, no limit, cancel or end reason meanwhile) keeps its instance for SSH (keep_on_failure_s),
     * unless the last list shows it stopped (no sshd to enter).
     */
    keepsFailure: ({ context }, params: TaskEndCode | undefined) => keepsFailure(context, params),
  },
  actions: {
    startSearch: emit(({ context }) => ({ type: 'search.started' as const, relaxLevel: context.relaxLevel })),
    /** The fail-over's candidates the budget left can pay for (the search's count of gone offers goes on). */
    keepAffordable: assign((_, params: { candidates: Candidate[] }) => ({ candidates: params.candidates })),
    storeCandidates: assign(({ context }, params: { candidates: Candidate[] }) => withCandidates(context, params.candidates)),
    reportFound: emit(({ context }) => ({
      type: 'search.found' as const,
      relaxLevel: context.relaxLevel,
      count: context.candidates.length,
    })),
    relax: assign({ relaxLevel: ({ context }) => context.relaxLevel + 1 }),
    reportRelaxed: emit(({ context }) => ({ type: 'relaxed' as const, level: context.relaxLevel })),
    /** A failure of unknown time (not through the daemon's actors) waits for the deadline. */
    scheduleSearchRetry: assign(({ context }, params: { error: unknown }) => {
      const at = failureOf(params.error).at;
      return { searchRetryAt: at === null ? context.deadlineAt : Math.min(at + context.limits.outageBackoffS * 1000, context.deadlineAt) };
    }),
    reportSearchRetry: emit(({ context }, params: { error: unknown }) => ({
      type: 'search.retry' as const,
      error: failureOf(params.error).error,
      retryAt: context.searchRetryAt ?? context.deadlineAt,
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
    endAttemptWithoutInstance: assign(({ context }, params: { outcome: AttemptOutcome; detail: string; at: number }) =>
      concludeAttempt(context, params.outcome, params.detail, params.at),
    ),
    reportAttemptEnded: emit(({ context }) => attemptEndedEvent(context)),
    /** Marks why the current instance is being destroyed; the attempt ends once it is gone. */
    markEndingPriceOverCap: assign(({ context }, params: { instance: InstanceStatus | null }) =>
      endingPriceOverCap(context, params.instance!),
    ),
    markEndingFromStatus: assign(({ context }, params: { instance: InstanceStatus | null; wasRunning: boolean }) =>
      endingFromStatus(context, params.instance!, params.wasRunning),
    ),
    markEndingMissing: assign(({ context }) => endingMissing(context)),
    markEndingCreatedStopped: assign(({ context }, params: { detail: string }) => endingCreatedStopped(context, params.detail)),
    markEndingNotRunning: assign(({ context }, params: PollParams) => endingNotRunning(context, params.instance!, params.listedAt)),
    markEndingCancelled: assign(({ context }) => endingCancelled(context)),
    markEndingBootTimeout: assign(({ context }, params: { at: number; look: LastLook | null }) =>
      endingBootTimeout(context, params.at, params.look),
    ),
    markEndingForEndReason: assign(({ context }) => endingForEndReason(context)),
    markEndingUnreachable: assign(({ context }, params: { why?: string }) => endingUnreachable(context, params.why)),
    markEndingOutbid: assign(({ context }, params: { instance: InstanceStatus | null; why: string }) =>
      endingOutbid(context, params.instance, params.why),
    ),
    markEndingExpired: assign(({ context }, params: { reason: RunError }) => endingExpired(context, params.reason)),
    /** The instance is going: say so at once, while its logs can still be asked for. */
    reportAttemptEnding: emit(({ context }) => ({
      type: 'attempt.ending' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      outcome: context.current!.ending?.outcome ?? 'lost',
      detail: context.current!.ending?.detail ?? '',
    })),
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
      const since = statusSince(cur, params.instance, params.listedAt);
      // Started again after a stop whose log held no end (a blip while booting): its next stop is read afresh.
      const rechecks = cur.taskChecked && !mayBeTaskEnd(params.instance);
      if (changed || cur.missingPolls > 0 || since !== cur.statusSince || rechecks)
        enqueue.assign({
          current: { ...cur, status: params.instance, missingPolls: 0, statusSince: since, ...(rechecks ? { taskChecked: false } : {}) },
        });
    }),
    markProbing: assign(({ context }, params: PollParams) => withProbing(context, params.instance!, params.listedAt)),
    reportProbing: emit(({ context }) => ({ type: 'attempt.status' as const, n: context.current!.n, status: context.current!.status! })),
    markRunning: assign(({ context }, params: { instance: InstanceStatus | null; reachable: Endpoint[] | null }) =>
      withRunning(context, params.instance, params.reachable),
    ),
    /** The endpoints that answered with a banner, kept while berth logs in to them. */
    markReachable: assign(({ context }, params: { reachable: Endpoint[] }) => ({
      current: { ...context.current!, reachable: params.reachable },
    })),
    reportRunning: emit(({ context }, params: { via: 'ssh' | 'status' | 'callback'; login?: LoginOutput }) => ({
      type: 'attempt.running' as const,
      n: context.current!.n,
      status: context.current!.status!,
      reachable: context.current!.reachable,
      via: params.via,
      ...(params.login ? { login: params.login } : {}),
    })),
    raiseBid: assign(({ context }, params: At) => withBidRaised(context, nextBid(context.limits, context.current!)!, params.at)),
    reportBidRaised: emit(({ context }) => ({
      type: 'bid.raised' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      price: context.current!.bidPrice!,
      dphTotal: context.current!.bidPrice! + context.current!.diskDph,
    })),
    restartBoot: assign(({ context }, params: PollParams) => withRestartedBoot(context, params.instance, params.listedAt)),
    switchToOnDemand: assign({ searchType: 'on-demand' as const, candidates: [] }),
    reportSwitched: emit({ type: 'search.switched' as const, to: 'on-demand' as const }),
    requestCancel: assign({ cancelRequested: true }),
    requestExpire: assign(({ context }, params: { reason: RunError }) => ({ expire: context.expire ?? params.reason })),
    /** A lost running instance starts a new search with a fresh deadline: the old one was met. */
    restartDeadline: assign(({ context }, params: PollParams) => ({ deadlineAt: params.listedAt + context.limits.deadlineS * 1000 })),
    setDeadlineReason: assign(({ context }) => ({ endReason: deadlineError(context) })),
    destroyRequested: assign(({ context }, params: { requestedAt: number }) => ({
      current: { ...context.current!, destroyRequestedAt: params.requestedAt, retryAt: null },
    })),
    reportDestroyRequested: emit(({ context }) => ({
      type: 'destroy.requested' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
    })),
    scheduleDestroyRetry: assign(({ context }, params: { at: number | null }) => withDestroyRetry(context, params.at)),
    reportDestroyRetry: emit(({ context }, params: { error: unknown }) => ({
      type: 'destroy.retry' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      error: failureOf(params.error).error,
      retryAt: context.current!.retryAt!,
    })),
    reportDestroyConfirmed: emit(({ context }) => ({
      type: 'destroy.confirmed' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
    })),
    concludeDestroyedAttempt: assign(({ context }, params: PollParams) => concludeDestroyed(context, params.listedAt)),
    reportHandedToWarm: emit(({ context }, params: { output: DestroyOutput }) => ({
      type: 'instance.warm' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      holdId: params.output.handed!.holdId,
      idleUntil: params.output.handed!.idleUntil,
    })),
    concludeHandedAttempt: assign(({ context }, params: { output: DestroyOutput }) =>
      concludeDestroyed(context, params.output.requestedAt),
    ),
    failFatal: assign((_, params: { error: unknown }) => ({ error: failureOf(params.error).error })),
    failFromEndReason: assign(({ context }) => ({ error: context.endReason })),
    failAttemptsSpent: assign(({ context }) => ({ error: attemptsSpentError(context) })),
    failDeadline: assign(({ context }) => ({ error: deadlineError(context) })),
    failNoOffers: assign(({ context }, params: { why: string | undefined }) => ({ error: noOffersError(context, params.why) })),
    failExpired: assign(({ context }, params: { reason?: RunError | undefined }) => ({
      error: params.reason ?? context.expire,
      expire: params.reason ?? context.expire,
    })),
    reportFailed: emit(({ context }) => ({ type: 'run.failed' as const, error: context.error! })),
    reportExpired: emit(({ context }) => ({ type: 'run.expired' as const, error: context.error! })),
    reportCancelled: emit({ type: 'run.cancelled' as const }),
    markEndingWorkdirMissing: assign(({ context }, params: { refused?: string | undefined }) =>
      endingWorkdirMissing(context, params.refused),
    ),
    markEndingTask: assign(({ context }, params: { exitCode: number; onstart?: boolean | undefined }) =>
      endingTask(context, params.exitCode, params.onstart ?? false),
    ),
    /** The limit reached while the log was read, which showed no end: the instance goes, the run expires. */
    markEndingExpiredNow: assign(({ context }) => endingExpired(context, context.expire!)),
    reportTaskEnded: emit(({ context }) => ({
      type: 'task.ended' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      exitCode: context.taskExit!,
    })),
    /** The task stopped its instance and its log never came: the instance goes, the run ends with the exit code unknown. */
    markEndingTaskUnread: assign(({ context }) => endingTaskUnread(context)),
    markTaskChecked: assign(({ context }) => withTaskChecked(context)),
    /**
     * The last listed status, judged again once the log said the stop was not the task's end, as of
     * when the read ended (issue #29): a loss found then restarts the deadline and the rebid wait
     * from then, not from the instance's creation hours before.
     */
    replayStatus: raise(({ context }, params: At) => ({
      type: 'POLL' as const,
      instance: context.current!.status,
      listedAt: params.at,
    })),
    countRestart: assign(({ context }) => ({ taskRestarts: context.taskRestarts + 1 })),
    failTask: assign(({ context }) => ({ error: taskFailedError(context) })),
    reportSucceeded: emit({ type: 'run.succeeded' as const }),
    /**
     * The task ended: its outputs are taken until files.outputs_timeout_s from then (an absolute time,
     * so a restart keeps it). An instance its task stopped (the daemon was away at its end) is started
     * again first (issue #48): STOPPED_START_S more for that.
     */
    startCollecting: assign(({ context }, params: At) => ({
      current: {
        ...context.current!,
        collectUntil:
          params.at +
          ((context.limits.outputsTimeoutS ?? 0) +
            (stoppedByTask(context.current!.status) ? (context.limits.stoppedKeepS ?? STOPPED_START_S) : 0)) *
            1000,
      },
    })),
    reportCollecting: emit(({ context }) => ({
      type: 'outputs.started' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      until: context.current!.collectUntil!,
    })),
    reportCollected: emit(({ context }, params: CollectOutput) => ({
      type: 'outputs.ended' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      result: params,
    })),
    reportOverLimit: emit(({ context }, params: { reason: RunError }) => ({
      type: 'outputs.over_limit' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      reason: params.reason,
      until: context.current!.collectUntil!,
    })),
    /** The keep's bound: keep_on_failure_s from when it began (an absolute time, so a restart keeps it). */
    startKeeping: assign(({ context }, params: At) => ({
      current: { ...context.current!, keepUntil: params.at + (context.limits.keepOnFailureS ?? 0) * 1000 },
    })),
    reportKept: emit(({ context }) => ({
      type: 'task.kept' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      until: context.current!.keepUntil!,
    })),
    reportKeepEnded: emit(({ context }, params: { why: string }) => ({
      type: 'task.keep_ended' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      why: params.why,
    })),
    reportCollectCut: emit(({ context }, params: { why: string }) => ({
      type: 'outputs.cut' as const,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      why: params.why,
    })),
  },
});
