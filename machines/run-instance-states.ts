// The states in which a run holds an instance: booting (waiting for `running`, then for SSH to
// answer), rebidding (an interruptible instance that was outbid), running, and destroying. Each is
// left only for another of them or through `destroying`, which ends the attempt once a list no
// longer shows the instance; so a run holds at most one instance and never forgets it.
//
//   booting           at the boot deadline, one more look at the instance (the last list seen may be
//                     older): ready by that look → running; else → destroying (boot_timeout); never
//                     while a task's end is read (booting.checkingTask): the read decides first
//   booting.starting  running status → probing (or running when ready_when is "status"); any other
//                     status waits, an unasked stop until it lasts STOPPED_BLIP_MS (run-rules.ts)
//   booting.probing   an SSH banner at an endpoint → loggingIn; none by readiness.ssh_timeout_s →
//                     destroying (unreachable), or running when the run is now ready by status (a
//                     task restored from before its plan made it so)
//   booting.loggingIn berth logs in and runs a command → running; a login that does not work by the
//                     same SSH deadline, or cannot (no usable key, a changed host key) → running by
//                     the banner, the reason in the running event (never destroying: SSH answers)
//   rebidding         bid raised (change-bid), then waits for the instance to start again →
//                     booting; still stopped after rebidWaitS → raise again, or fail over at the cap
//   running           lost, failed or outbid → destroying (or rebidding); listed neither running nor
//                     failed for bootTimeoutS → destroying (lost); cancel/expire → destroying;
//                     with outputs, a cancel, a limit or a price over the cap → collecting first
//   collecting        a task's outputs taken (download or cloud copy; a task that had not ended
//                     stopped first) → destroying, by its end, its deadline (files.outputs_timeout_s)
//                     or a cancel that says not to take them (`--no-outputs`, a second cancel); a
//                     limit reached meanwhile waits for that deadline; → keeping as below
//   keeping           a task that failed for good (no restart left), keep_on_failure_s > 0: the
//                     instance kept for SSH until its bound → destroying; cancel, a limit, or a
//                     list without it → destroying at once
//   destroying        destroy, then confirmed by absence from a list (retried forever) → settle;
//                     or handed to a warm hold instead (issue #51, the daemon's call) → settle
import { raise, stateIn } from 'xstate';
import { failureOf, mayBeTaskEnd, sshEndpoints, stoppedByTask, stopsTaskFirst, type RunError } from './run-rules.js';

/** How long a task's log is read at a limit while its instance may still bill its GPU (TaskEndInput.withinMs). */
const LIMIT_READ_MS = 30_000;
import { runSetup, type PollParams } from './run-setup.js';
import type { BootDeadlineOutput, CollectOutput, LastLook, LoginOutput, ProbeOutput, RunContext, SleepOutput } from './run-types.js';

type AnyEvent = { event: { type: string } };
const poll = ({ event }: AnyEvent) => event as unknown as PollParams;
/** When a list was made or a sleeper woke: the time an action triggered by either happened. */
const listedAt = (a: AnyEvent) => ({ at: poll(a).listedAt });
const wokeAt = ({ event }: AnyEvent) => ({ at: (event as unknown as { output: SleepOutput }).output.at });
/**
 * The boot deadline and its last look. A snapshot stored while the deadline was a plain sleep
 * resumes that sleep, whose output has no look: judged as when no list answered.
 */
const deadlineMet = ({ event }: AnyEvent): { at: number; look: LastLook | null } => {
  const output = (event as unknown as { output: Partial<BootDeadlineOutput> & SleepOutput }).output;
  return { at: output.at, look: output.look ?? null };
};
/** The deadline's last look as a list of the instance (null: no list answered, or it was not in it). */
const lookAsPoll = (a: AnyEvent): PollParams => {
  const { at, look } = deadlineMet(a);
  return { instance: look?.instance ?? null, listedAt: at };
};
const reasonOf = ({ event }: AnyEvent) => ({ reason: (event as unknown as { reason: RunError }).reason });

/**
 * A poll that shows the wanted instance outbid, failed or gone, in the order they are judged. An
 * outbid is judged first: an interruptible instance stopped by the market is not a failed host.
 * `wasRunning`: the run had reached running, so a new attempt gets a fresh deadline.
 */
function unwantedPolls(wasRunning: boolean) {
  const fresh = wasRunning ? ([{ type: 'restartDeadline', params: poll }] as const) : ([] as const);
  // A running task with outputs whose host raised its price: they are taken before the fail-over (issue #48).
  const overCapCollecting = wasRunning
    ? ([
        {
          guard: { type: 'priceOverCapTakingOutputs', params: poll },
          target: '#run.collecting',
          actions: [
            { type: 'markEndingPriceOverCap', params: (a: AnyEvent) => ({ instance: poll(a).instance }) },
            { type: 'startCollecting', params: listedAt },
            ...fresh,
          ],
        },
      ] as const)
    : ([] as const);
  return [
    {
      guard: { type: 'outbidToRebid', params: poll },
      target: '#run.rebidding',
      actions: [{ type: 'raiseBid', params: listedAt }, 'reportBidRaised'],
    },
    {
      guard: { type: 'outbidToOnDemand', params: poll },
      target: '#run.destroying',
      actions: [
        { type: 'markEndingOutbid', params: (a: AnyEvent) => ({ instance: poll(a).instance, why: 'trying on-demand offers next' }) },
        'switchToOnDemand',
        'reportSwitched',
        ...fresh,
      ],
    },
    {
      guard: { type: 'isOutbid', params: poll },
      target: '#run.destroying',
      actions: [
        {
          type: 'markEndingOutbid',
          params: (a: AnyEvent) => ({ instance: poll(a).instance, why: 'failing over to the next offer' }),
        },
        ...fresh,
      ],
    },
    ...overCapCollecting,
    {
      guard: { type: 'priceOverCap', params: poll },
      target: '#run.destroying',
      actions: [{ type: 'markEndingPriceOverCap', params: (a: AnyEvent) => ({ instance: poll(a).instance }) }, ...fresh],
    },
    {
      // While booting, a stop berth did not ask for is a loss only once it lasts (run-rules.ts STOPPED_BLIP_MS).
      guard: { type: wasRunning ? 'statusIsFailure' : 'bootStatusIsFailure', params: poll },
      target: '#run.destroying',
      actions: [{ type: 'markEndingFromStatus', params: (a: AnyEvent) => ({ instance: poll(a).instance, wasRunning }) }, ...fresh],
    },
    {
      guard: { type: 'instanceLost', params: poll },
      target: '#run.destroying',
      actions: ['markEndingMissing', ...fresh],
    },
    // After it ran: frozen, restarting, a new value ... for as long as a boot may take (while booting, the boot deadline judges).
    ...(wasRunning
      ? ([
          {
            guard: { type: 'notRunningTooLong', params: poll },
            target: '#run.destroying',
            actions: [{ type: 'markEndingNotRunning', params: poll }, ...fresh],
          },
        ] as const)
      : ([] as const)),
  ] as const;
}

/**
 * A task's instance listed stopped or exited: its log is read for the end marker before anything
 * else is judged (an outbid or a failed host leaves no marker; the task's wrapper always does).
 * While booting the log is read without the run becoming `running`: a short task may end between two
 * lists, but an instance that exits while booting with no marker is a boot failure, judged as one.
 */
const taskEndPoll = (from: 'booting' | 'running') =>
  ({
    guard: { type: 'taskMayHaveEnded', params: poll },
    target: `#run.${from}.checkingTask`,
    actions: { type: 'notePoll', params: poll },
  }) as const;

/**
 * Reads the log of a task's stopped instance; without an end marker, goes back to `returnTo` and
 * judges the last list there. While booting it goes back by entering `booting` again: the boot
 * deadline is `booting`'s own invoke, and it judges nothing while a task's end is read (issue #49: a
 * task that ended in its first second, its log upload still pending when a short deadline came,
 * was judged `boot_timeout` and run again on the next offer). Entered again, the deadline (an
 * absolute time) fires at once if it passed meanwhile, with a last look as of then.
 */
/**
 * A read made at the boot deadline (the instance not listed stopped or exited: the deadline's look
 * saw it otherwise), ended past that deadline: nothing is left to wait for. (A read for a listed stop
 * goes back to `booting`, whose deadline then looks again.)
 */
const readAtDeadline = (context: RunContext, at: number): boolean =>
  at >= context.current!.bootDeadlineAt! && !(context.current!.status && mayBeTaskEnd(context.current!.status));

const checkingTaskState = (returnTo: 'starting' | 'watching') => {
  const back = returnTo === 'starting' ? ({ target: '#run.booting', reenter: true } as const) : ({ target: returnTo } as const);
  return runSetup.createStateConfig({
    description:
      "A list showed the task's instance stopped or exited: its log is read for the end marker. With one, the task ended and the instance goes; without, the stop is judged as it would be without a task (a boot failure, an outbid or a loss).",
    invoke: {
      src: 'readTaskEnd',
      input: ({ context }) => ({
        runId: context.runId,
        n: context.current!.n,
        instanceId: context.current!.instanceId!,
        // Not listed stopped or exited (read at a limit, or at the boot deadline): the instance may
        // bill its GPU while its log is read, so the read is bounded.
        ...(!(context.current!.status && mayBeTaskEnd(context.current!.status)) ? { withinMs: LIMIT_READ_MS } : {}),
        // Stopped by its task: disk only, so its log is read for minutes rather than judged lost.
        ...(stoppedByTask(context.current!.status) ? { stoppedByTask: true } : {}),
      }),
      onDone: [
        // The workdir never arrived: the task never started; the attempt fails over.
        {
          guard: ({ event }) => event.output.exitCode !== null && event.output.workdir === true,
          target: '#run.destroying',
          actions: { type: 'markEndingWorkdirMissing', params: {} },
        },
        // With outputs, they are taken before the instance goes; their time budget counts from the read's end.
        {
          guard: ({ context, event }) => event.output.exitCode !== null && context.limits.outputs === true,
          target: '#run.collecting',
          actions: [
            { type: 'markEndingTask', params: ({ event }) => ({ exitCode: event.output.exitCode!, onstart: event.output.onstart }) },
            'reportTaskEnded',
            { type: 'startCollecting', params: ({ event }) => ({ at: event.output.at }) },
          ],
        },
        // A failure that ends the run keeps its instance for SSH a while (keep_on_failure_s).
        {
          guard: {
            type: 'keepsFailure',
            params: ({ event }) => ({
              exitCode: event.output.exitCode ?? 0,
              onstart: event.output.exitCode !== null && event.output.onstart === true,
            }),
          },
          target: '#run.keeping',
          actions: [
            { type: 'markEndingTask', params: ({ event }) => ({ exitCode: event.output.exitCode!, onstart: event.output.onstart }) },
            'reportTaskEnded',
          ],
        },
        {
          guard: ({ event }) => event.output.exitCode !== null,
          target: '#run.destroying',
          actions: [
            {
              type: 'markEndingTask',
              params: ({ event }) => ({ exitCode: event.output.exitCode!, onstart: event.output.onstart }),
            },
            'reportTaskEnded',
          ],
        },
        // A limit was reached (entered on EXPIRE, or it came while reading) and the task had not ended:
        // with outputs, the task is stopped and they are taken first (issue #48).
        {
          guard: 'expireTakesOutputs',
          target: '#run.collecting',
          actions: ['markEndingExpiredNow', { type: 'startCollecting', params: ({ event }) => ({ at: event.output.at }) }],
        },
        { guard: 'expireRequested', target: '#run.destroying', actions: 'markEndingExpiredNow' },
        // The task stopped its instance and its log never came: not a loss to run again.
        {
          guard: { type: 'taskEndUnread', params: ({ event }) => ({ unread: event.output.unread === true }) },
          target: '#run.destroying',
          actions: 'markEndingTaskUnread',
        },
        // Read at the boot deadline with no stop listed, and no end found: the deadline judges now.
        ...(returnTo === 'starting'
          ? [
              {
                guard: ({ context, event }: { context: RunContext; event: { output: { at: number } } }) =>
                  readAtDeadline(context, event.output.at),
                target: '#run.destroying',
                actions: {
                  type: 'markEndingBootTimeout',
                  params: ({ event }: { event: { output: { at: number } } }) => ({ at: event.output.at, look: null }),
                },
              } as const,
            ]
          : []),
        { ...back, actions: ['markTaskChecked', { type: 'replayStatus', params: ({ event }) => ({ at: event.output.at }) }] },
      ],
      onError: [
        {
          guard: 'expireTakesOutputs',
          target: '#run.collecting',
          actions: ['markEndingExpiredNow', { type: 'startCollecting', params: ({ event }) => ({ at: failureOf(event.error).at ?? 0 }) }],
        },
        { guard: 'expireRequested', target: '#run.destroying', actions: 'markEndingExpiredNow' },
        {
          ...back,
          actions: ['markTaskChecked', { type: 'replayStatus', params: ({ event }) => ({ at: failureOf(event.error).at ?? 0 }) }],
        },
      ],
    },
    on: {
      // Lists keep coming while the log is read: noted, and judged once it has been.
      POLL: { actions: { type: 'notePoll', params: poll } },
      // A limit reached while the log is read waits for it: an end that happened wins (issue #29).
      EXPIRE: { actions: { type: 'requestExpire', params: reasonOf } },
    },
  });
};

/** The SSH wait's end: readiness.ssh_timeout_s after the list showed the instance running, within the boot deadline. */
const sshDeadline = (context: RunContext): number =>
  Math.min(context.current!.runningSeenAt! + context.limits.sshTimeoutS * 1000, context.current!.bootDeadlineAt!);

/** The service moved the SSH port: probe the new endpoints (the readiness clock keeps running). */
const probeElsewhere = {
  guard: { type: 'runningElsewhere', params: poll },
  target: 'probing',
  reenter: true,
  actions: { type: 'notePoll', params: poll },
} as const;

/** Ready by SSH once the login ended, how it ended said in the running event. */
const readyByLogin = (login: (a: { event: unknown }) => LoginOutput) =>
  ({
    target: '#run.running',
    actions: [
      {
        type: 'markRunning',
        params: ({ context }: { context: RunContext }) => ({ instance: null, reachable: context.current!.reachable }),
      },
      { type: 'reportRunning', params: (a: { event: unknown }) => ({ via: 'ssh' as const, login: login(a) }) },
    ],
  }) as const;

/** An SSH wait that ran out for a run now ready by status: running (by the list that began the wait), not unreachable. */
const readyWithoutSsh = {
  guard: 'probingReadyByStatus',
  target: '#run.running',
  actions: [
    { type: 'markRunning', params: { instance: null, reachable: null } },
    { type: 'reportRunning', params: { via: 'status' } },
  ],
} as const;

/** Cancel and expiry while an instance is wanted: it is destroyed first. */
const endedByRun = {
  CANCEL: { target: '#run.destroying', actions: 'markEndingCancelled' },
  EXPIRE: { target: '#run.destroying', actions: { type: 'markEndingExpired', params: reasonOf } },
} as const;

/**
 * The same for a state that can read a task's log: a task run at a limit has its log read first, so
 * that a task that already ended (its output unread, the daemon down or its read queued) ends as
 * it did and not `expired`; without an end marker the instance goes as above.
 */
const endedByRunReadingTask = (from: 'booting' | 'running') =>
  ({
    CANCEL: endedByRun.CANCEL,
    EXPIRE: [
      { guard: 'isTaskRun', target: `#run.${from}.checkingTask`, actions: { type: 'requestExpire', params: reasonOf } },
      endedByRun.EXPIRE,
    ],
  }) as const;

/** The task probe read this attempt's end marker while its instance still runs: the task ended. */
type TaskEndEvent = { event: { n: number; exitCode: number; onstart: boolean; at: number; workdir?: boolean; workdirRefused?: string } };
const ending = [
  { type: 'markEndingTask', params: ({ event }: TaskEndEvent) => ({ exitCode: event.exitCode, onstart: event.onstart }) },
  'reportTaskEnded',
] as const;
const taskEndedByProbe = {
  TASK_END: [
    // The workdir never arrived (or its upload was refused): the task never started; the attempt fails over.
    {
      guard: { type: 'workdirMissingOfCurrent', params: ({ event }: TaskEndEvent) => ({ n: event.n, workdir: event.workdir === true }) },
      target: '#run.destroying',
      actions: { type: 'markEndingWorkdirMissing', params: ({ event }: TaskEndEvent) => ({ refused: event.workdirRefused }) },
    },
    // With outputs, they are taken before the instance goes; their time budget counts from when the end was read.
    {
      guard: { type: 'taskEndOfCurrent', params: ({ event }: TaskEndEvent) => ({ n: event.n, collects: true }) },
      target: '#run.collecting',
      actions: [...ending, { type: 'startCollecting', params: ({ event }: TaskEndEvent) => ({ at: event.at }) }],
    },
    {
      guard: {
        type: 'taskEndOfCurrent',
        params: ({ event }: TaskEndEvent) => ({ n: event.n, keeps: { exitCode: event.exitCode, onstart: event.onstart } }),
      },
      target: '#run.keeping',
      actions: ending,
    },
    {
      guard: { type: 'taskEndOfCurrent', params: ({ event }: TaskEndEvent) => ({ n: event.n }) },
      target: '#run.destroying',
      actions: ending,
    },
  ],
} as const;

export const bootingState = runSetup.createStateConfig({
  description: 'The instance exists; waits for the list to show it running, then for SSH to answer, before the boot deadline.',
  initial: 'starting',
  invoke: {
    src: 'bootDeadline',
    input: ({ context }) => ({
      runId: context.runId,
      n: context.current!.n,
      instanceId: context.current!.instanceId!,
      until: context.current!.bootDeadlineAt!,
      readyWhen: context.limits.readyWhen,
    }),
    onDone: [
      // A task's end being read: the read decides first, and a return to `booting` restarts this wait.
      { guard: stateIn('#run.booting.checkingTask') },
      // The last look shows a task's instance stopped or exited, unseen by any list before: the task
      // may have ended between two lists (a list interval longer than the boot deadline): its end is
      // read before the deadline judges (issue #49, found by the task fuzzer).
      {
        guard: { type: 'taskMayHaveEnded', params: lookAsPoll },
        target: '#run.booting.checkingTask',
        actions: { type: 'notePoll', params: lookAsPoll },
      },
      {
        guard: { type: 'lookAnswersSsh', params: deadlineMet },
        target: '#run.running',
        actions: [
          { type: 'markRunning', params: (a) => ({ instance: deadlineMet(a).look!.instance, reachable: deadlineMet(a).look!.reachable }) },
          { type: 'reportRunning', params: { via: 'ssh' } },
        ],
      },
      {
        guard: { type: 'lookReadyByStatus', params: deadlineMet },
        target: '#run.running',
        actions: [
          { type: 'markRunning', params: (a) => ({ instance: deadlineMet(a).look!.instance, reachable: null }) },
          { type: 'reportRunning', params: { via: 'status' } },
        ],
      },
      // A task's run whose last look saw it not running (no list answered in time, or one that lags
      // the container): its task may have run and ended unseen, so its log is read (bounded) before
      // the attempt is judged (issue #49, the task fuzzer on a loaded machine: a 0.4 s task ran twice).
      {
        guard: { type: 'taskEndUnseenAtDeadline', params: deadlineMet },
        target: '#run.booting.checkingTask',
      },
      { target: '#run.destroying', actions: { type: 'markEndingBootTimeout', params: deadlineMet } },
    ],
  },
  on: {
    ...endedByRunReadingTask('booting'),
    ...taskEndedByProbe,
    POLL: [taskEndPoll('booting'), ...unwantedPolls(false), { actions: { type: 'notePoll', params: poll } } as const],
    /** The onstart callback: the script ran, so the instance is up (the list still confirms it). */
    READY: {
      guard: { type: 'readyForCurrent', params: ({ event }) => ({ n: event.n }) },
      target: '#run.running',
      actions: [
        { type: 'markRunning', params: { instance: null, reachable: null } },
        { type: 'reportRunning', params: { via: 'callback' } },
      ],
    },
  },
  states: {
    starting: {
      description: 'Provisioning or loading: waits for a list that shows it running.',
      on: {
        POLL: [
          {
            guard: { type: 'runningReadyByStatus', params: poll },
            target: '#run.running',
            actions: [
              { type: 'markRunning', params: (a) => ({ instance: poll(a).instance, reachable: null }) },
              { type: 'reportRunning', params: { via: 'status' } },
            ],
          },
          {
            guard: { type: 'statusIsRunning', params: poll },
            target: 'probing',
            actions: [{ type: 'markProbing', params: poll }, 'reportProbing'],
          },
        ],
      },
    },
    probing: {
      description: 'Running by the list: probes the SSH endpoints until one answers with a banner (one probe in flight).',
      invoke: [
        {
          src: 'probeSsh',
          input: ({ context }) => ({
            runId: context.runId,
            n: context.current!.n,
            instanceId: context.current!.instanceId!,
            endpoints: sshEndpoints(context.current!.status),
          }),
          onDone: {
            target: 'loggingIn',
            actions: { type: 'markReachable', params: ({ event }) => ({ reachable: (event.output as ProbeOutput).reachable }) },
          },
          onError: [
            readyWithoutSsh,
            {
              target: '#run.destroying',
              actions: { type: 'markEndingUnreachable', params: ({ event }) => ({ why: failureOf(event.error).error.message }) },
            },
          ],
        },
        {
          src: 'sleepUntil',
          input: ({ context }) => ({ until: sshDeadline(context) }),
          onDone: [readyWithoutSsh, { target: '#run.destroying', actions: { type: 'markEndingUnreachable', params: {} } }],
        },
      ],
      on: { POLL: [probeElsewhere] },
    },
    loggingIn: {
      description:
        "SSH answered with a banner: logs in with berth's key and runs a command, tried again until the SSH deadline; the banner alone when that does not work.",
      invoke: {
        src: 'loginSsh',
        input: ({ context }) => ({
          runId: context.runId,
          n: context.current!.n,
          instanceId: context.current!.instanceId!,
          endpoints: context.current!.reachable ?? [],
          until: sshDeadline(context),
        }),
        onDone: readyByLogin(({ event }) => (event as { output: LoginOutput }).output),
        // The login's own failure (it resolves with why otherwise): SSH still answered, so running by the banner.
        onError: readyByLogin(({ event }) => {
          const { error } = failureOf((event as { error: unknown }).error);
          return { ok: false, code: error.kind, why: error.message };
        }),
      },
      on: { POLL: [probeElsewhere] },
    },
    checkingTask: checkingTaskState('starting'),
  },
});

export const rebiddingState = runSetup.createStateConfig({
  description: 'An interruptible instance was outbid: raises its bid (never past the price cap) and waits for it to start again.',
  initial: 'raising',
  // Entered with the bid raised by the transition (an outbid poll, or a wait that ran out).
  on: {
    ...endedByRun,
    ...taskEndedByProbe,
    POLL: [
      taskEndPoll('running'),
      // Still stopped by the market (its record changes as the bid does): wait for the raised bid.
      { guard: { type: 'isOutbid', params: poll }, actions: { type: 'notePoll', params: poll } },
      {
        guard: { type: 'statusIsFailure', params: poll },
        target: '#run.destroying',
        actions: { type: 'markEndingFromStatus', params: (a) => ({ instance: poll(a).instance, wasRunning: false }) },
      },
      { guard: { type: 'instanceLost', params: poll }, target: '#run.destroying', actions: 'markEndingMissing' },
      // The raised bid won: the instance starts again, with a new boot deadline and a new SSH check.
      // The same poll goes on to booting: when it already shows running, no later poll may say so
      // again (the driver passes on changes only), and the boot deadline would destroy a live instance.
      {
        guard: { type: 'restarted', params: poll },
        target: '#run.booting',
        actions: [{ type: 'restartBoot', params: poll }, raise(({ event }) => event)],
      },
      { actions: { type: 'notePoll', params: poll } },
    ],
  },
  states: {
    raising: {
      description: 'One change-bid call in flight.',
      invoke: {
        src: 'changeBid',
        input: ({ context }) => ({
          runId: context.runId,
          n: context.current!.n,
          instanceId: context.current!.instanceId!,
          price: context.current!.bidPrice!,
          dphTotal: context.current!.bidPrice! + context.current!.diskDph,
        }),
        onDone: 'waiting',
        onError: {
          target: '#run.destroying',
          actions: {
            type: 'markEndingOutbid',
            params: ({ event }) => ({ instance: null, why: `the bid could not be raised (${failureOf(event.error).error.message})` }),
          },
        },
      },
    },
    waiting: {
      description: 'Bid raised; the market may still be higher. Raises again after a while, or fails over at the cap.',
      invoke: {
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.current!.rebidAt! + (context.limits.bid?.rebidWaitS ?? 60) * 1000 }),
        onDone: [
          {
            guard: 'canRaiseBid',
            target: '#run.rebidding',
            reenter: true,
            actions: [{ type: 'raiseBid', params: wokeAt }, 'reportBidRaised'],
          },
          {
            target: '#run.destroying',
            actions: { type: 'markEndingOutbid', params: { instance: null, why: 'still outbid with the bid at the price cap' } },
          },
        ],
      },
    },
  },
});

/** A cancel of a running task with outputs: the task is stopped and they are taken until files.outputs_timeout_s from the cancel. */
type CancelEvent = { event: { at?: number; now?: boolean } };
const cancelTakingOutputs = {
  guard: { type: 'cancelTakesOutputs', params: ({ event }: CancelEvent) => ({ at: event.at, now: event.now }) },
  target: '#run.collecting',
  actions: ['markEndingCancelled', { type: 'startCollecting', params: ({ event }: CancelEvent) => ({ at: event.at! }) }],
} as const;

export const runningState = runSetup.createStateConfig({
  description: 'The instance runs and answers SSH; the run keeps watching it until its task ends, or it is cancelled, expired or lost.',
  initial: 'watching',
  on: {
    ...endedByRunReadingTask('running'),
    CANCEL: [cancelTakingOutputs, endedByRun.CANCEL],
    ...taskEndedByProbe,
    POLL: [taskEndPoll('running'), ...unwantedPolls(true), { actions: { type: 'notePoll', params: poll } } as const],
  },
  states: {
    watching: {
      description: 'Each list is judged: a task that may have ended, an outbid, a failure, a loss, or nothing new.',
    },
    checkingTask: checkingTaskState('watching'),
  },
});

export const destroyingState = runSetup.createStateConfig({
  description: 'Removes the current instance and waits until the list no longer shows it; never gives up.',
  initial: 'requesting',
  entry: 'reportAttemptEnding',
  on: {
    CANCEL: { actions: 'requestCancel' },
    EXPIRE: { actions: { type: 'requestExpire', params: reasonOf } },
    // Heard in every sub-state: a list taken after an accepted destroy that no longer holds the
    // instance ends it, even while a retry waits or a second destroy is in flight (only a list
    // heard while confirming counted before, so a slow list cost a whole confirm window more).
    POLL: {
      guard: { type: 'goneSinceDestroy', params: poll },
      target: '#run.settle',
      actions: ['reportDestroyConfirmed', { type: 'concludeDestroyedAttempt', params: poll }, 'reportAttemptEnded'],
    },
  },
  states: {
    requesting: {
      description: 'One destroy call in flight (idempotent; the instance may already be gone).',
      entry: 'reportDestroyRequested',
      invoke: {
        src: 'destroyInstance',
        input: ({ context }) => ({
          runId: context.runId,
          n: context.current!.n,
          instanceId: context.current!.instanceId!,
          outcome: context.current!.ending?.outcome ?? null,
        }),
        onDone: [
          {
            // Handed to a warm hold instead (issue #51): the hold has it now; nothing to wait for.
            guard: { type: 'handedToWarm', params: ({ event }) => ({ output: event.output }) },
            target: '#run.settle',
            actions: [
              { type: 'reportHandedToWarm', params: ({ event }) => ({ output: event.output }) },
              { type: 'concludeHandedAttempt', params: ({ event }) => ({ output: event.output }) },
              'reportAttemptEnded',
            ],
          },
          {
            target: 'confirming',
            actions: { type: 'destroyRequested', params: ({ event }) => ({ requestedAt: event.output.requestedAt }) },
          },
        ],
        onError: {
          target: 'waiting',
          actions: [
            { type: 'scheduleDestroyRetry', params: ({ event }) => ({ at: failureOf(event.error).at }) },
            { type: 'reportDestroyRetry', params: ({ event }) => ({ error: event.error }) },
          ],
        },
      },
    },
    confirming: {
      description: 'Destroy accepted; waits for a list taken after it that no longer holds the instance (heard by the parent).',
      invoke: {
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.current!.destroyRequestedAt! + context.limits.destroyConfirmS * 1000 }),
        onDone: {
          target: 'waiting',
          actions: [
            { type: 'scheduleDestroyRetry', params: wokeAt },
            {
              type: 'reportDestroyRetry',
              params: ({ context }) => ({
                error: { code: 'not_confirmed', message: `instance ${context.current!.instanceId} still listed after destroy` },
              }),
            },
          ],
        },
      },
    },
    waiting: {
      description: 'A destroy failed or was not confirmed; waits with backoff, then destroys again.',
      invoke: {
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.current!.retryAt ?? 0 }),
        onDone: 'requesting',
      },
    },
  },
});

/** Where a collect's end leads: a failure that ends the run keeps its instance (keep_on_failure_s), else it goes. */
const afterCollect = <A>(report: A) =>
  [
    { guard: 'keepsFailure', target: '#run.keeping', actions: report },
    { target: '#run.destroying', actions: report },
  ] as const;

/**
 * The task ended and left outputs: they are taken before the instance goes (issue #40); or it was
 * cancelled, reached a limit or a price over the cap while it ran, and is stopped first (issue #48:
 * the collect sends TERM, then KILL after a grace). The instance still bills (its GPU for a download,
 * its disk for a cloud copy on the stopped instance), so the state has its own deadline
 * (files.outputs_timeout_s from the end, the cancel or the limit, in context: a restart keeps it).
 * A limit reached meanwhile waits for that deadline (said once, `outputs.over_limit`): the most a
 * limit costs is its own figure plus one collection (docs/money.md). A cancel that says not to take
 * them (`now`: `--no-outputs`, a second cancel) stops the transfer and destroys at once; a cancel
 * without it is taken as asked and the collection goes on. The task's end, when it was read, still
 * decides how the run ends (settle). Whatever came is kept.
 */
export const collectingState = runSetup.createStateConfig({
  description:
    'The task ended and left outputs: they are downloaded (or copied to the cloud) before the instance is destroyed, until files.outputs_timeout_s, a limit or a cancel; what came is kept, a cut transfer marked partial.',
  entry: 'reportCollecting',
  invoke: [
    {
      src: 'collectOutputs',
      input: ({ context }) => ({
        runId: context.runId,
        n: context.current!.n,
        instanceId: context.current!.instanceId!,
        until: context.current!.collectUntil!,
        stopped: context.current!.status?.actual_status === 'stopped',
        ...(stopsTaskFirst(context.current!) ? { stopTask: true as const } : {}),
      }),
      onDone: afterCollect({ type: 'reportCollected', params: ({ event }) => (event as { output: CollectOutput }).output }),
      onError: afterCollect({
        type: 'reportCollectCut',
        params: ({ event }) => ({ why: failureOf((event as { error: unknown }).error).error.message }),
      }),
    },
    {
      src: 'sleepUntil',
      input: ({ context }) => ({ until: context.current!.collectUntil! }),
      onDone: afterCollect({ type: 'reportCollectCut', params: { why: 'files.outputs_timeout_s passed' } }),
    },
  ],
  on: {
    CANCEL: [
      {
        guard: ({ event }) => event.now === true,
        target: '#run.destroying',
        actions: ['requestCancel', { type: 'reportCollectCut', params: { why: 'the run was cancelled without its outputs' } }],
      },
      { actions: 'requestCancel' },
    ],
    EXPIRE: {
      guard: 'firstExpire',
      actions: [
        { type: 'requestExpire', params: reasonOf },
        { type: 'reportOverLimit', params: reasonOf },
      ],
    },
    POLL: { actions: { type: 'notePoll', params: poll } },
  },
});

/**
 * A task that failed for good (no restart left) keeps its instance for `berth ssh`
 * (keep_on_failure_s, issue #50), its outputs already taken; then it is destroyed and the run
 * ends `failed` (task_failed, the exit code) as it would have at once. The instance bills its GPU
 * all along, so every cap goes on counting: a limit (EXPIRE) destroys at once, and so does a
 * cancel, which ends the keep and not the task's outcome. The bound is an absolute time in context,
 * read off the clock on entry (`clocking`: the machine reads none itself), so a restart resumes it.
 * A list without the instance (the container's own backstop destroyed it, no daemon up) ends it too.
 */
export const keepingState = runSetup.createStateConfig({
  description:
    "A task that failed for good keeps its instance for SSH until keep_on_failure_s has passed, billing meanwhile; a cancel, a limit or the instance's loss destroys it at once. The run then ends failed (task_failed).",
  initial: 'clocking',
  states: {
    clocking: {
      description: "Reads the clock once: the keep's bound is keep_on_failure_s from now.",
      invoke: {
        src: 'sleepUntil',
        input: () => ({ until: 0 }),
        onDone: { target: 'held', actions: [{ type: 'startKeeping', params: wokeAt }, 'reportKept'] },
      },
    },
    held: {
      description: 'The instance is kept for SSH until its bound.',
      invoke: {
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.current!.keepUntil! }),
        onDone: '#run.destroying',
      },
    },
  },
  on: {
    CANCEL: { target: '#run.destroying', actions: { type: 'reportKeepEnded', params: { why: 'the run was cancelled' } } },
    EXPIRE: {
      target: '#run.destroying',
      actions: [
        { type: 'requestExpire', params: reasonOf },
        { type: 'reportKeepEnded', params: (a) => ({ why: `a limit was reached: ${reasonOf(a).reason.message}` }) },
      ],
    },
    POLL: [
      {
        guard: { type: 'instanceLost', params: poll },
        target: '#run.destroying',
        actions: [
          { type: 'notePoll', params: poll },
          { type: 'reportKeepEnded', params: { why: 'the instance is no longer listed' } },
        ],
      },
      { actions: { type: 'notePoll', params: poll } },
    ],
  },
});
