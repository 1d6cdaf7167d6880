// Pure decisions of the run machine, kept apart so they can be read and tested on their own.
// Nothing here does I/O or reads the clock (eslint.config.js holds machines/ to that).
import { countText } from '../src/count-text.js';
import { toRunError, type RunError } from '../src/errors.js';
import { overCap } from '../src/money-rules.js';
import type {
  ActorFailure,
  AttemptOutcome,
  BidPolicy,
  CurrentAttempt,
  Endpoint,
  InstanceStatus,
  RunContext,
  RunLimits,
  AttemptSummary,
} from './run-types.js';

export type { AttemptOutcome, AttemptSummary, InstanceStatus } from './run-types.js';

export type { RunError } from '../src/errors.js';

const OCI_FAILURE = /OCI runtime create failed/i;
/**
 * Docker could not publish the container's ports: another container holds them. The service accepts
 * two creates on one offer and launches both; the losers "fail to fully start or raise an error when
 * the remote node's Docker daemon attempts to bind the same port multiple times", an error that
 * reaches the caller only in the instance's record (SkyPilot PR #9117, 2026-03). Docker's words:
 * "Bind for 0.0.0.0:P failed: port is already allocated", or "address already in use".
 */
const PORT_TAKEN = /port is already allocated|address already in use/i;

/**
 * A status_msg saying the image was not pulled. The official client's self-test reads such a message
 * (`actual_status: "created"`, `status_msg: "Error response from daemon: manifest for
 * vastai/test:self-test-v2-cuda-99 not found"`, vast-cli tests/cli/test_machines_commands.py) as
 * `docker_pull_failed` and destroys at once (vastai/cli/self_test/runtime_diagnostics.py); its
 * pattern also matches "pull" alone, which would take a pull in progress for a failure, so berth
 * reads docker's error phrases only.
 */
const PULL_FAILURE =
  /manifest (for \S+ )?(not found|unknown)|no matching manifest|pull access denied|repository does not exist|requested access to the resource is denied|unauthorized: |no such image|invalid reference format|error pulling image|failed to pull|toomanyrequests|pull rate limit/i;
/**
 * Of those, the ones every host answers the same (the image, its tag or the registry login is wrong),
 * so another offer would fail alike: the run ends at once instead of renting up to max_attempts
 * hosts. A pull that timed out or hit a registry's rate limit (per host address) fails over.
 */
const IMAGE_UNAVAILABLE =
  /manifest (for \S+ )?(not found|unknown)|no matching manifest|pull access denied|repository does not exist|requested access to the resource is denied|unauthorized: |no such image|invalid reference format/i;
const TRANSIENT_PULL = /toomanyrequests|rate limit|timeout|timed out|i\/o timeout|connection reset|temporary failure|TLS handshake|EOF/i;

/** The status says the image cannot be pulled on any host: docker's words for it, or null. */
export function imageUnavailable(status: InstanceStatus): string | null {
  const msg = status.status_msg;
  if (!msg || !IMAGE_UNAVAILABLE.test(msg) || TRANSIENT_PULL.test(msg)) return null;
  return msg.slice(0, 300);
}

/**
 * The failure an instance status means, or null while it may still boot or is healthy.
 * `exited`, `unknown` and `offline` are terminal (seed, section 3 rule 1); a container stuck in
 * `created` with an OCI error never starts (service notes), nor one whose ports another container
 * holds (a double-bought offer, PORT_TAKEN); `stopped` that berth did not ask for
 * means an interruptible instance was outbid.
 */
export function failureOfStatus(status: InstanceStatus): { outcome: AttemptOutcome; detail: string } | null {
  const actual = status.actual_status;
  const msg = status.status_msg ? `: ${status.status_msg.slice(0, 200)}` : '';
  if (actual === 'exited' || actual === 'unknown' || actual === 'offline') {
    return { outcome: actual, detail: `instance ${status.id} went ${actual}${msg}` };
  }
  if (actual !== 'running' && status.status_msg && PORT_TAKEN.test(status.status_msg)) {
    return {
      outcome: 'exited',
      detail: `instance ${status.id} cannot start: another container holds its ports (most likely a create on the same offer that won)${msg}`,
    };
  }
  if (status.status_msg && OCI_FAILURE.test(status.status_msg)) {
    return { outcome: 'exited', detail: `instance ${status.id} failed to start${msg}` };
  }
  if (imageUnavailable(status) !== null) {
    return { outcome: 'image_unavailable', detail: `instance ${status.id} cannot pull its image${msg}` };
  }
  if (status.status_msg && PULL_FAILURE.test(status.status_msg)) {
    return { outcome: 'exited', detail: `instance ${status.id} could not pull its image${msg}` };
  }
  if (actual === 'stopped') {
    // berth never stops an instance: a stop it did not ask for and that the service did not make
    // (intended_status stopped) came from the container or the account's owner.
    const by = status.intended_status === 'stopped' ? 'was stopped, not by berth (intended_status: stopped)' : 'was stopped by the service';
    return { outcome: 'lost', detail: `instance ${status.id} ${by}${msg}` };
  }
  return null;
}

export function isRunningStatus(status: InstanceStatus): boolean {
  return status.actual_status === 'running';
}

/**
 * How long a `stopped` that berth did not ask for may last while the instance boots before it is
 * judged a loss. A third party reports `stopped` appearing benignly early in a healthy container's
 * life (inference-plane's vast notes, in ../shared/notes/service-facts.md "Added 2026-12-01"), and
 * berth's lists come every few seconds: a stop that is still there this long after a list first
 * showed it is not such a blip. The boot deadline bounds it in any case. Not for a stop the task
 * made (intended_status stopped: its end is read, run-instance-states.ts) nor an outbid (a bid run).
 */
export const STOPPED_BLIP_MS = 30_000;

/**
 * Since when the listed `actual_status` has been what it is: the attempt's record of it when a list
 * before this one showed the same, else the time of this list (a status never seen before, or one
 * restored from a snapshot that did not keep it, starts its count now).
 */
export function statusSince(current: Pick<CurrentAttempt, 'status' | 'statusSince'>, status: InstanceStatus, listedAt: number): number {
  return current.status !== null && current.status.actual_status === status.actual_status && typeof current.statusSince === 'number'
    ? current.statusSince
    : listedAt;
}

/** A `stopped` berth did not ask for and the task did not make: a blip while young, a loss once it lasts. */
export function unaskedStop(status: InstanceStatus): boolean {
  return status.actual_status === 'stopped' && status.intended_status !== 'stopped';
}

/**
 * Neither running nor a failure: `null` while the contract is made, `loading`, `created`, `frozen`,
 * `restarting`, `rebooting`, `recycling` (SkyPilot's vast provisioner waits on null, created,
 * restarting, rebooting and loading; `recycling` follows a recycle, recycle_instance.yaml), and any
 * value the service adds without notice (SkyPilot reads those as still starting). While booting each
 * is "still starting" until the boot deadline; after the instance ran, each is waited on for as long
 * as a boot may take (bootTimeoutS), then the instance is lost. `exited`, `unknown` and `offline`
 * are failures, not these (SPEC 3 rule 1; SkyPilot fails them at once: a host without heartbeat).
 */
export function notRunningYet(status: InstanceStatus): boolean {
  return status.actual_status !== 'running' && status.actual_status !== 'stopped' && failureOfStatus(status) === null;
}

/**
 * Whether berth judges this status by how long it lasts, so that a list showing it unchanged must
 * still reach the run (the driver passes on changes only otherwise): an unasked stop, and, once the
 * attempt's instance has run, any status that is not running.
 */
export function judgedWhileItLasts(status: InstanceStatus, hasRun: boolean): boolean {
  return unaskedStop(status) || (hasRun && notRunningYet(status));
}

/**
 * Outcomes after which the machine (not only the offer) is not tried again for this run: the host
 * itself failed. Not an offer taken by someone else, a refused create, an outbid (the market moved,
 * not the machine), nor an attempt the run itself ended (cancelled, expired).
 */
const MACHINE_AT_FAULT: ReadonlySet<AttemptOutcome> = new Set(['exited', 'unknown', 'offline', 'boot_timeout', 'unreachable', 'lost']);

export function blocksMachine(outcome: AttemptOutcome): boolean {
  return MACHINE_AT_FAULT.has(outcome);
}

/** An offer that was gone before anything booted does not use up one of the run's attempts (SPEC 4.2). */
export function countsAgainstLimit(outcome: AttemptOutcome): boolean {
  return outcome !== 'offer_unavailable' && outcome !== 'cancelled' && outcome !== 'expired' && !isTaskOutcome(outcome);
}

/** The attempt ended because its task did (max_restarts, not max_attempts, counts failed tasks). */
function isTaskOutcome(outcome: AttemptOutcome): boolean {
  return outcome === 'succeeded' || outcome === 'task_failed' || outcome === 'exit_unknown';
}

/**
 * Outputs taken while the task had not ended (a cancel or a limit, issue #48): the collect stops
 * the task first (TERM, then KILL after a grace). An attempt ending as its task did needs no stop.
 */
export function stopsTaskFirst(attempt: Pick<CurrentAttempt, 'ending'>): boolean {
  return attempt.ending === null || !isTaskOutcome(attempt.ending.outcome);
}

/**
 * A list shows a task's instance stopped or exited: maybe the wrapper stopped it at the task's end,
 * maybe the market or the host did. Only the end marker in its log tells (read once per stop), so
 * this is a reason to read the log, never the end itself.
 */
export function mayBeTaskEnd(status: InstanceStatus): boolean {
  return status.intended_status === 'stopped' || status.actual_status === 'stopped' || status.actual_status === 'exited';
}

/**
 * Stopped from inside: intended_status stopped, which berth never sets and an outbid leaves as it
 * was. The task's wrapper stops its instance so at its end (the account's owner or the service
 * stopping it for want of credit look the same); it bills only its disk (billing.mdx).
 */
export function stoppedByTask(status: InstanceStatus | null): boolean {
  return status?.intended_status === 'stopped';
}

/**
 * An interruptible instance that was outbid: the service stopped it (`actual_status` stopped) while
 * berth still wants it running (`intended_status` is not `stopped`: berth never stops instances, it
 * destroys them). A bid create that the machine cannot start now comes back the same way.
 */
export function isOutbid(status: InstanceStatus, attempt: Pick<CurrentAttempt, 'bidPrice'>): boolean {
  return attempt.bidPrice !== null && status.actual_status === 'stopped' && status.intended_status !== 'stopped';
}

/**
 * The instance bills above the run's cap: its listed `dph_total` passed `max_price_per_hour`, which
 * only a host raising the price of the running contract does (berth rents and rebids under the cap).
 */
export function priceOverCap(status: InstanceStatus, maxPricePerHour: number): boolean {
  return typeof status.dph_total === 'number' && overCap(status.dph_total, maxPricePerHour);
}

/**
 * Where SSH can answer for this record: the service's proxy (`ssh_host`:`ssh_port`), and the host's
 * own address with the port mapped to 22 (`public_ipaddr` + `ports["22/tcp"][0].HostPort`, present
 * only while running). Either may be missing.
 */
export function sshEndpoints(status: InstanceStatus | null): Endpoint[] {
  if (!status) return [];
  const out: Endpoint[] = [];
  if (status.ssh_host && typeof status.ssh_port === 'number' && status.ssh_port > 0) {
    out.push({ kind: 'proxy', host: status.ssh_host, port: status.ssh_port });
  }
  const mapped = Number(status.ports?.['22/tcp']?.[0]?.HostPort);
  if (status.public_ipaddr && Number.isInteger(mapped) && mapped > 0) {
    out.push({ kind: 'direct', host: status.public_ipaddr, port: mapped });
  }
  return out;
}

export function sameEndpoints(a: Endpoint[], b: Endpoint[]): boolean {
  return a.length === b.length && a.every((e, i) => e.kind === b[i]!.kind && e.host === b[i]!.host && e.port === b[i]!.port);
}

/** The compute bid an attempt starts with: the offer's min_bid for 'min', else the spec's price. */
export function firstBid(bid: BidPolicy | null, minBid: number | null): number | null {
  if (!bid) return null;
  return bid.price === 'min' ? (minBid ?? null) : bid.price;
}

/**
 * The next bid after an outbid: the current one raised by stepPct, never past what keeps the billed
 * price (bid + disk) under the run's cap. Null when the bid cannot go up any more.
 */
export function nextBid(
  limits: Pick<RunLimits, 'bid' | 'maxPricePerHour'>,
  attempt: Pick<CurrentAttempt, 'bidPrice' | 'diskDph'>,
): number | null {
  if (!limits.bid || attempt.bidPrice === null) return null;
  const ceiling = roundBid(limits.maxPricePerHour - attempt.diskDph);
  const raised = roundBid(attempt.bidPrice * (1 + limits.bid.stepPct / 100));
  const next = Math.min(Math.max(raised, attempt.bidPrice + 0.001), ceiling);
  return next > attempt.bidPrice ? next : null;
}

/**
 * Bids go to the service with 3 decimals (its minimum step, 0.001 $/h), rounded down so a bid never
 * passes the ceiling it was cut to. Not a money comparison: the 1e-9 is of a step, so that a float a
 * hair below a whole step (0.3 * 1000 = 299.99999999999994) is not floored to the step below it.
 */
function roundBid(x: number): number {
  return Math.floor(x * 1000 + 1e-9) / 1000;
}

/**
 * The "full story" line of a failed run: every offer tried and why it failed. Offers that were gone
 * (rented by someone else first) are counted, not listed: there can be many and none was at fault.
 */
export function describeAttempts(attempts: AttemptSummary[]): string {
  if (attempts.length === 0) return 'no offer was tried';
  const gone = attempts.filter((a) => a.outcome === 'offer_unavailable');
  const listed = attempts
    .filter((a) => a.outcome !== 'offer_unavailable')
    .map((a) => {
      const inst = a.instanceId === null ? '' : `, instance ${a.instanceId}`;
      return `#${a.n} offer ${a.offerId} (machine ${a.machineId}${inst}): ${a.outcome ?? 'unfinished'}${a.detail ? ` (${a.detail})` : ''}`;
    });
  if (gone.length > 0)
    listed.push(
      `${countText(gone.length, 'offer')} gone before ${gone.length === 1 ? 'it' : 'they'} could be rented (${gone
        .slice(-5)
        .map((a) => a.offerId)
        .join(', ')}${gone.length > 5 ? ', ...' : ''})`,
    );
  return listed.join('; ');
}

/** Exponential backoff for destroy retries: 1 s, 2 s, 4 s ... capped. */
export function destroyBackoffMs(failures: number, maxDelayS: number): number {
  return Math.min(maxDelayS * 1000, 1000 * 2 ** Math.max(0, failures - 1));
}

const isActorFailure = (err: unknown): err is ActorFailure =>
  typeof err === 'object' &&
  err !== null &&
  typeof (err as ActorFailure).fatal === 'boolean' &&
  typeof (err as ActorFailure).error === 'object' &&
  'at' in err;

/**
 * What an actor's rejection means to the machine. The daemon's actors reject with an
 * `ActorFailure` that carries the verdict of the one policy table (src/client/retry-policy.ts
 * RUN_POLICY) and the time: not decided here. The machine sees every search error, and of a
 * create's only those the create actor rethrows (the ones that fail the run). Anything else did not
 * come through the daemon's actors (a missing actor, a bug): it fails the run, with no time known.
 */
export function failureOf(err: unknown): ActorFailure {
  if (isActorFailure(err)) return err;
  return { error: toRunError(err), fatal: true, at: null };
}

/** How many recently gone offers a run keeps out of its searches. */
export const GONE_OFFERS_KEPT = 64;

/**
 * Run errors whose message the daemon completes with every offer tried and why (from the attempts
 * table, which holds the story; the machine's context does not).
 */
export const ERRORS_LISTING_ATTEMPTS: ReadonlySet<RunError['kind']> = new Set(['deadline', 'attempts_exhausted', 'no_offers']);

export function deadlineError(context: RunContext): RunError {
  return {
    kind: 'deadline',
    message: `The run's deadline of ${context.limits.deadlineS} s passed before an instance was running.`,
  };
}

/** Closes the current attempt: records its outcome, blocks what failed, counts it against the limit. */
export function concludeAttempt(context: RunContext, outcome: AttemptOutcome, detail: string, endedAt: number): Partial<RunContext> {
  const cur = context.current!;
  const blockedMachines =
    blocksMachine(outcome) && !context.blockedMachines.includes(cur.machineId)
      ? [...context.blockedMachines, cur.machineId]
      : context.blockedMachines;
  const gone = outcome === 'offer_unavailable';
  // A gone offer was rented by someone else, not at fault: it is kept out of searches for a while
  // (a bounded list), never blocked for good. A task that ended says nothing of its offer.
  const offers = gone
    ? { goneOffers: [...context.goneOffers.filter((id) => id !== cur.offerId), cur.offerId].slice(-GONE_OFFERS_KEPT) }
    : isTaskOutcome(outcome)
      ? {}
      : { blockedOffers: context.blockedOffers.includes(cur.offerId) ? context.blockedOffers : [...context.blockedOffers, cur.offerId] };
  return {
    ...offers,
    current: null,
    blockedMachines,
    candidates: context.candidates.filter((c) => !blockedMachines.includes(c.machineId)),
    spentAttempts: context.spentAttempts + (countsAgainstLimit(outcome) ? 1 : 0),
    goneThisSearch: context.goneThisSearch + (gone ? 1 : 0),
    lastEnded: { n: cur.n, offerId: cur.offerId, machineId: cur.machineId, instanceId: cur.instanceId, outcome, detail, endedAt },
  };
}

/**
 * The one definition of "the instance's status changed": what berth acts on or records (status,
 * its message, the SSH endpoint, the billed price). The run machine reports a status only when it
 * changed, and the driver hands a run a listed status only when it changed (an absence always).
 */
export function sameStatus(a: InstanceStatus | null, b: InstanceStatus | null): boolean {
  if (a === null || b === null) return a === b;
  return (
    a.id === b.id &&
    a.dph_total === b.dph_total &&
    a.actual_status === b.actual_status &&
    a.status_msg === b.status_msg &&
    a.ssh_host === b.ssh_host &&
    a.ssh_port === b.ssh_port
  );
}
