// How the run machine's context changes: each function takes the context (and what the action
// knows) and returns the fields that change, or builds an emitted event from it. The machine's
// named actions are one-line wrappers around these, so run-machine.ts reads as states and
// transitions. Pure: the clock comes in as `now`.
import {
  concludeAttempt,
  deadlineError,
  destroyBackoffMs,
  firstBid,
  failureOfStatus,
  imageUnavailable,
  isRunningStatus,
  mayBeTaskEnd,
  statusSince,
  type AttemptOutcome,
  type InstanceStatus,
  type RunError,
} from './run-rules.js';
import type { LastLook, Candidate, CurrentAttempt, Endpoint, RunContext, RunEmitted } from './run-types.js';

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
    diskDph: next.diskDph,
    ...(next.gpu ? { gpu: next.gpu } : {}),
    instanceId: null,
    createdAt: null,
    bootDeadlineAt: null,
    destroyRequestedAt: null,
    destroyFailures: 0,
    retryAt: null,
    missingPolls: 0,
    status: null,
    ending: null,
    bidPrice: context.searchType === 'bid' ? firstBid(context.limits.bid, next.minBid) : null,
    runningSeenAt: null,
    reachable: null,
    rebidAt: null,
    taskChecked: false,
  };
  return { attemptCount: n, candidates: rest, current };
}

/** The create succeeded: the attempt owns this instance and must see it running by its boot deadline. */
export function withInstance(context: RunContext, instanceId: number, createdAt: number): Change {
  const cur = context.current!;
  const bootDeadlineAt = Math.min(createdAt + context.limits.bootTimeoutS * 1000, context.deadlineAt);
  return { current: { ...cur, instanceId, createdAt, bootDeadlineAt } };
}

/** The list shows it running: SSH readiness is checked from here. */
export function withProbing(context: RunContext, instance: InstanceStatus, now: number): Change {
  const cur = context.current!;
  return { current: { ...cur, status: instance, missingPolls: 0, runningSeenAt: cur.runningSeenAt ?? now } };
}

/** Ready: by status, by an SSH banner on `reachable`, or by the onstart callback (status kept as last listed). */
export function withRunning(context: RunContext, instance: InstanceStatus | null, reachable: Endpoint[] | null): Change {
  const cur = context.current!;
  return { current: { ...cur, status: instance ?? cur.status, missingPolls: 0, reachable } };
}

/** The instance starts again after a rebid: it gets a new boot deadline and is probed afresh. */
export function withRestartedBoot(context: RunContext, instance: InstanceStatus | null, now: number): Change {
  const cur = context.current!;
  return {
    current: {
      ...cur,
      status: instance ?? cur.status,
      missingPolls: 0,
      bootDeadlineAt: now + context.limits.bootTimeoutS * 1000,
      runningSeenAt: null,
      reachable: null,
      // Started again: its task starts again too, and its next stop is read afresh.
      taskChecked: false,
    },
  };
}

export function withBidRaised(context: RunContext, price: number, now: number): Change {
  return { current: { ...context.current!, bidPrice: price, rebidAt: now } };
}

function withEnding(context: RunContext, ending: Ending, change: Change = {}): Change {
  return { ...change, current: { ...context.current!, ...change.current, ending } };
}

/** Why the current instance is destroyed; the attempt ends with it once the instance is gone. */
function endingAs(context: RunContext, outcome: AttemptOutcome, detail: string): Change {
  return withEnding(context, { outcome, detail });
}

/** A failed status; a running instance that fails counts as lost. */
export function endingFromStatus(context: RunContext, instance: InstanceStatus, wasRunning: boolean): Change {
  const failure = failureOfStatus(instance)!;
  const ending = wasRunning ? { outcome: 'lost' as const, detail: failure.detail } : failure;
  const change: Change = { current: { ...context.current!, status: instance } };
  // Every host would fail the same pull: the run ends once this instance is gone, no next offer.
  if (ending.outcome === 'image_unavailable' && context.endReason === null) change.endReason = imageUnavailableError(context, instance);
  return withEnding(context, ending, change);
}

function imageUnavailableError(context: RunContext, instance: InstanceStatus): RunError {
  return {
    kind: 'image_unavailable',
    message:
      `The image cannot be pulled (${imageUnavailable(instance)}): check the image name and tag, and image_login for a private ` +
      `registry. berth tried no other offer, since every host would fail the same (attempt ${context.current!.n}).`,
  };
}

/** The listed price passed the run's cap (a host raised it): the instance goes, the next offer is tried. */
export function endingPriceOverCap(context: RunContext, instance: InstanceStatus): Change {
  const detail = `instance ${instance.id} is listed at $${instance.dph_total}/h, above max_price_per_hour ($${context.limits.maxPricePerHour}/h): its host raised the price; failing over`;
  return withEnding(context, { outcome: 'price_over_cap', detail }, { current: { ...context.current!, status: instance } });
}

/** After it ran, the instance was listed neither running nor failed for as long as a boot may take (run-rules.ts notRunningYet). */
export function endingNotRunning(context: RunContext, instance: InstanceStatus, listedAt: number): Change {
  const s = Math.round((listedAt - statusSince(context.current!, instance, listedAt)) / 1000);
  const msg = instance.status_msg ? `: ${instance.status_msg.slice(0, 200)}` : '';
  const detail = `instance ${instance.id} listed ${instance.actual_status === null ? 'without a status' : `'${instance.actual_status}'`} for ${s} s after it ran${msg}`;
  return withEnding(context, { outcome: 'lost', detail }, { current: { ...context.current!, status: instance } });
}

/** The service made the instance stopped and said the create failed: it goes before anything boots. */
export function endingCreatedStopped(context: RunContext, detail: string): Change {
  return endingAs(context, 'create_failed', detail);
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

/**
 * The boot deadline passed (and the last look at the instance, `look`, did not show it ready);
 * when the run's own deadline passed too, the run fails after the destroy. An instance a list
 * showed running but whose SSH never answered is `unreachable`. `look` is null when no list
 * answered in time (the run judges by what it last saw), its instance null when that list did not
 * show the instance.
 */
export function endingBootTimeout(context: RunContext, now: number, look: LastLook | null = null): Change {
  const cur = context.current!;
  const fresh = look?.instance ?? null;
  const status = fresh ?? cur.status;
  const seen = look && !fresh ? 'not listed' : (status?.actual_status ?? 'provisioning');
  const deadline = now >= context.deadlineAt;
  const runningAtLook = cur.runningSeenAt === null && fresh !== null && isRunningStatus(fresh);
  const unreachable = cur.runningSeenAt !== null || runningAtLook;
  const detail = deadline
    ? `run deadline reached while instance ${cur.instanceId} was ${unreachable ? 'running without answering SSH' : seen}`
    : runningAtLook
      ? `instance ${cur.instanceId} was first listed running by a last look at its boot deadline (boot_timeout_s, ${context.limits.bootTimeoutS} s), and SSH${sshEndpointsText(fresh)} did not answer with a banner then`
      : unreachable
        ? unreachableDetail(context)
        : `instance ${cur.instanceId} still ${seen} after ${context.limits.bootTimeoutS} s`;
  return withEnding(
    context,
    { outcome: unreachable ? 'unreachable' : 'boot_timeout', detail },
    { endReason: deadline ? deadlineError(context) : context.endReason, current: { ...cur, status } },
  );
}

/** Why the SSH wait ended: a probe that gave up (`why`), or the earlier of its two bounds. */
function unreachableDetail(context: RunContext, why?: string): string {
  const cur = context.current!;
  const where = sshEndpointsText(cur.status);
  return `instance ${cur.instanceId} was running but SSH${where} did not answer with a banner ${why ? `(${why})` : sshBoundText(context)}`;
}

/**
 * The SSH wait runs from the first list that showed the instance running until readiness.ssh_timeout_s
 * later or the boot deadline, whichever comes first: say which one it was, and how long the wait was.
 */
function sshBoundText(context: RunContext): string {
  const cur = context.current!;
  const seenAt = cur.runningSeenAt;
  const sshTimeoutMs = context.limits.sshTimeoutS * 1000;
  if (seenAt === null || cur.bootDeadlineAt === null || cur.bootDeadlineAt >= seenAt + sshTimeoutMs) {
    return `within ${context.limits.sshTimeoutS} s (readiness.ssh_timeout_s)`;
  }
  const waitedS = Math.max(0, Math.round((cur.bootDeadlineAt - seenAt) / 100) / 10);
  const bound =
    cur.bootDeadlineAt >= context.deadlineAt
      ? `the run's deadline (deadline_s, ${context.limits.deadlineS} s)`
      : `the boot deadline (boot_timeout_s, ${context.limits.bootTimeoutS} s)`;
  return `within ${waitedS} s of being listed running: ${bound} ended the wait`;
}

function sshEndpointsText(status: InstanceStatus | null): string {
  const parts = [];
  if (status?.ssh_host && status.ssh_port) parts.push(`${status.ssh_host}:${status.ssh_port}`);
  const direct = status?.ports?.['22/tcp']?.[0]?.HostPort;
  if (status?.public_ipaddr && direct) parts.push(`${status.public_ipaddr}:${direct}`);
  return parts.length ? ` at ${parts.join(' and ')}` : '';
}

/** Running by the list, but SSH never answered within readiness.ssh_timeout_s (or the probe gave up). */
export function endingUnreachable(context: RunContext, why?: string): Change {
  return endingAs(context, 'unreachable', unreachableDetail(context, why));
}

/** Outbid and not rebid (on_outbid failover or on_demand, or the bid reached the cap). */
export function endingOutbid(context: RunContext, instance: InstanceStatus | null, why: string): Change {
  const cur = context.current!;
  return withEnding(
    context,
    { outcome: 'outbid', detail: `instance ${cur.instanceId} was outbid at $${cur.bidPrice ?? '?'}/h: ${why}` },
    { current: { ...cur, status: instance ?? cur.status } },
  );
}

/** The task's end marker was read: the instance goes, and the attempt ends with the task's outcome. */
export function endingTask(context: RunContext, exitCode: number, onstart: boolean): Change {
  const outcome = exitCode === 0 && !onstart ? ('succeeded' as const) : ('task_failed' as const);
  const detail = onstart
    ? `the onstart script exited with code ${exitCode} before the task started`
    : `the task exited with code ${exitCode}`;
  return { ...withEnding(context, { outcome, detail }), taskExit: exitCode, taskOnstart: onstart };
}

/**
 * The task's workdir did not reach its instance in time (the marker's `stage=workdir`), or berth
 * gave its upload up (`refused`: the key refused, the host key changed): the task never started,
 * the instance goes at once, and the attempt ends `unreachable` (berth could not get the task's
 * code in), so the run fails over to another offer as for any instance berth cannot reach.
 */
export function endingWorkdirMissing(context: RunContext, refused?: string): Change {
  const id = context.current!.instanceId;
  return endingAs(
    context,
    'unreachable',
    refused === undefined
      ? `instance ${id} did not receive the workdir in time (files.upload_timeout_s): the task never started`
      : `the workdir could not be put on instance ${id} (${refused}): the task never started`,
  );
}

/**
 * The task stopped its own instance, but its log could not be read for as long as the read went on:
 * the instance goes, and the run ends with the exit code unknown (running the task again could do
 * its work twice).
 */
export function endingTaskUnread(context: RunContext): Change {
  const id = context.current!.instanceId;
  const message = `The task stopped its instance ${id} (intended_status: stopped), but its log could not be read, so its exit code is unknown; it is not run again.`;
  return {
    ...withEnding(context, {
      outcome: 'exit_unknown',
      detail: `instance ${id} was stopped by its task; its log could not be read: exit code unknown`,
    }),
    endReason: context.endReason ?? { kind: 'exit_unknown', message },
  };
}

/** The log of a stopped task instance held no end marker: the stop is judged as an outbid or a loss. */
/**
 * The log was read and held no end. Kept only while the last list still shows the stop: an instance
 * that started again while its log was read (a blip while booting) has its next stop read afresh.
 */
export function withTaskChecked(context: RunContext): Change {
  const cur = context.current!;
  return { current: { ...cur, taskChecked: cur.status === null || mayBeTaskEnd(cur.status) } };
}

/** The run's error once its task failed with every restart spent. */
export function taskFailedError(context: RunContext): RunError {
  const code = context.taskExit ?? 1;
  const restarts = context.taskRestarts;
  const tried = restarts === 0 ? '' : ` (started ${restarts + 1} times: max_restarts is ${context.limits.maxRestarts})`;
  const what = context.taskOnstart
    ? `The onstart script exited with code ${code} before the task started`
    : `The task exited with code ${code}`;
  return { kind: 'task_failed', message: `${what}${tried}.`, exit_code: code };
}

/** The money guard ended the run: its instance goes, and the run ends `expired`. */
export function endingExpired(context: RunContext, reason: RunError): Change {
  return withEnding(context, { outcome: 'expired', detail: reason.message }, { expire: context.expire ?? reason });
}

/** The create finished after a cancel or the deadline: the new instance goes at once. */
export function endingForEndReason(context: RunContext): Change {
  if (!context.cancelRequested && context.expire) return endingAs(context, 'expired', context.expire.message);
  const detail = context.cancelRequested ? 'cancelled by the user while creating' : (context.endReason?.message ?? 'run ended');
  return endingAs(context, 'cancelled', detail);
}

/**
 * The next destroy after a failure at `now`. A failure of unknown time (an error that did not come
 * through the daemon's actors) counts from the last retry or the destroy request, so retries still
 * back off instead of spinning.
 */
export function withDestroyRetry(context: RunContext, at: number | null): Change {
  const cur = context.current!;
  const now = at ?? cur.retryAt ?? cur.destroyRequestedAt ?? cur.createdAt ?? 0;
  const failures = cur.destroyFailures + 1;
  return {
    current: { ...cur, destroyFailures: failures, retryAt: now + destroyBackoffMs(failures, context.limits.destroyRetryMaxDelayS) },
  };
}

/** The instance is gone: close the attempt with the reason it was destroyed for. */
export function concludeDestroyed(context: RunContext, endedAt: number): Change {
  const ending = context.current!.ending ?? { outcome: 'lost' as const, detail: 'destroyed' };
  return concludeAttempt(context, ending.outcome, ending.detail, endedAt);
}

/** A list taken after the instance was made no longer shows it, often enough to call it lost. */
export function isLost(context: RunContext, instance: InstanceStatus | null, listedAt: number): boolean {
  const cur = context.current;
  return instance === null && cur !== null && listedAt > (cur.createdAt ?? 0) && cur.missingPolls + 1 >= context.limits.missingPollsToLose;
}

/** A list taken after the destroy was accepted no longer shows the instance. */
export function isGoneSinceDestroy(context: RunContext, instance: InstanceStatus | null, listedAt: number): boolean {
  const requestedAt = context.current?.destroyRequestedAt;
  return instance === null && requestedAt != null && listedAt >= requestedAt;
}

export function attemptsSpentError(context: RunContext): RunError {
  return { kind: 'attempts_exhausted', message: `All ${context.limits.maxAttempts} attempts failed.` };
}

/** `why`: what excluded the offers, when the last search could tell (e.g. a price cap below the cheapest offer). */
export function noOffersError(context: RunContext, why?: string): RunError {
  return {
    kind: 'no_offers',
    message: `No usable offer matched the spec after ${context.relaxLevel} of ${context.limits.relaxSteps} relax steps${why ? `: ${why}` : ''}.`,
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
