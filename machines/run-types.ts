// The run machine's contracts: its input and limits, context, events, what it emits, and the
// inputs and outputs of the actors the daemon provides. Kept apart from the machine so that the
// machine file holds only states and their transitions.
import type { RunError } from '../src/errors.js';

/**
 * What one poll saw of an instance: the status fields of the service's record and nothing else, so
 * secrets (instance keys, env) are never carried here or into a snapshot. Declared here, not picked
 * from the client's record type, so the machine depends on no client module; the daemon's builder
 * (which copies these fields from a listed record) is where the type checker holds the two together.
 */
export interface InstanceStatus {
  id: number;
  actual_status: string | null;
  intended_status?: string | null;
  cur_state?: string | null;
  status_msg?: string | null;
  ssh_host?: string | null;
  ssh_port?: number | null;
  dph_total?: number | null;
  /** $/h of the instance's own disk (show_instances.yaml): what it bills while stopped. */
  storage_total_cost?: number | null;
  public_ipaddr?: string | null;
  /** Port mappings, present only while running: `{"22/tcp": [{"HostIp", "HostPort": "40022"}]}`. */
  ports?: Record<string, Array<{ HostIp?: string | undefined; HostPort?: string | undefined }> | null> | null;
}

/**
 * How an actor's failure reaches the machine: the run error, the verdict (whether it ends the run,
 * decided by the daemon's one policy table, src/client/retry-policy.ts), and when it happened (the
 * machine reads no clock). The daemon's actors reject with this shape (src/daemon/runs/actor-failure.ts).
 */
export interface ActorFailure {
  error: RunError;
  /** The run cannot go on (a rejected key, a missing permission, a search the service refuses). */
  fatal: boolean;
  /** ms since epoch; null only for an error that did not come through the daemon's actors (a bug). */
  at: number | null;
}

/** Outcomes of an attempt (docs/runs.md). */
export type AttemptOutcome =
  | 'running'
  | 'exited'
  | 'unknown'
  | 'offline'
  | 'boot_timeout'
  | 'unreachable'
  | 'outbid'
  /** The listed price passed max_price_per_hour (a host raised it): destroyed, next offer. */
  | 'price_over_cap'
  /** The image cannot be pulled on any host (a wrong name, tag or registry login): the run ends. */
  | 'image_unavailable'
  | 'expired'
  | 'offer_unavailable'
  | 'create_failed'
  | 'cancelled'
  | 'lost'
  /** The task (`run`) ended with exit code 0; the instance was destroyed after it. */
  | 'succeeded'
  /** The task ended with a non-zero exit code. */
  | 'task_failed'
  /** The task stopped its own instance, but its log could not be read: its exit code is unknown (not run again). */
  | 'exit_unknown';

export interface AttemptSummary {
  n: number;
  offerId: number;
  machineId: number;
  instanceId: number | null;
  outcome: AttemptOutcome | null;
  detail: string | null;
}

/** The last ended attempt as the context keeps it: `endedAt` is ms since epoch. */
type EndedAttempt = AttemptSummary & { endedAt: number };

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
  /** When the instance counts as ready: its SSH endpoint answers with a banner, or its status is running. */
  readyWhen: ReadyWhen;
  /** How long a running instance may stay unreachable over SSH before it is replaced (readiness.ssh_timeout_s). */
  sshTimeoutS: number;
  /** The run's price cap, $/h billed (compute and disk): a rebid never takes an instance past it. */
  maxPricePerHour: number;
  /** Interruptible runs only; null for on-demand. */
  bid: BidPolicy | null;
  /** The spec has a task (`run`): its end, read from the container's log, ends the run. */
  task: boolean;
  /** Times a task that exited non-zero starts again on a fresh instance (max_restarts). */
  maxRestarts: number;
  /** The task leaves outputs (the spec's `outputs`): taken in `collecting` before the destroy. Absent: none. */
  outputs?: boolean;
  /** How long `collecting` may hold the instance after the task's end, s (files.outputs_timeout_s). */
  outputsTimeoutS?: number;
  /**
   * How long an instance its task stopped before its outputs were taken is kept stopped while it is
   * started again (files.stopped_keep_s), s: `collecting` holds it that much longer. Absent: 180.
   */
  stoppedKeepS?: number;
  /** How long a task that failed for good keeps its instance in `keeping` for `berth ssh`, s (keep_on_failure_s). Absent: 0. */
  keepOnFailureS?: number;
}

type ReadyWhen = 'ssh' | 'status';
type OnOutbid = 'rebid' | 'failover' | 'on_demand';

export interface BidPolicy {
  /** $/h for compute, or 'min': the offer's min_bid at the time of the create. */
  price: number | 'min';
  /** Raise per rebid, percent of the current bid. */
  stepPct: number;
  onOutbid: OnOutbid;
  /** How long after a rebid the instance may stay stopped before the bid is raised again. */
  rebidWaitS: number;
}

/** Where SSH answers: the service's proxy, or the host's own address and mapped port. */
export interface Endpoint {
  kind: 'proxy' | 'direct';
  host: string;
  port: number;
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
  /** $/h billed for this run's disk, compute included (for a bid: at the bid berth will send). */
  dphTotal: number;
  /** The offer's current minimum bid, $/h (interruptible searches). */
  minBid: number | null;
  /** The disk's part of dphTotal, $/h: a bid plus this is what the instance is billed. */
  diskDph: number;
  /** The GPUs the offer rents; absent in runs stored before berth kept it (journaled as unknown). */
  gpu?: OfferGpu;
}

/** The GPUs an offer rents: its gpu_name and num_gpus, as the search listed them. */
interface OfferGpu {
  name: string;
  count: number;
}

export interface CurrentAttempt {
  n: number;
  offerId: number;
  machineId: number;
  dphTotal: number;
  /** The disk's part of the billed price, $/h (a rebid keeps bid + this under the cap). */
  diskDph: number;
  /** The GPUs its offer rents (journaled with the attempt); absent as in Candidate. */
  gpu?: OfferGpu;
  instanceId: number | null;
  createdAt: number | null;
  bootDeadlineAt: number | null;
  destroyRequestedAt: number | null;
  destroyFailures: number;
  retryAt: number | null;
  missingPolls: number;
  status: InstanceStatus | null;
  /**
   * When a list first showed the current `actual_status` (ms since epoch): a stop while booting
   * and a status other than running after it ran are judged by how long they last (run-rules.ts).
   * Absent in snapshots stored before machine version 10: counted from the next list.
   */
  statusSince?: number | null;
  /** Why the instance is being destroyed; null while it is wanted. */
  ending: { outcome: AttemptOutcome; detail: string } | null;
  /** The attempt's current bid, $/h of compute; null on-demand. */
  bidPrice: number | null;
  /** When a list first showed the instance running (readiness waits from here). */
  runningSeenAt: number | null;
  /** SSH endpoints that answered with a banner, once reachable. */
  reachable: Endpoint[] | null;
  /** When the bid was last raised (the instance then gets rebidWaitS to start again). */
  rebidAt: number | null;
  /**
   * A task run: the log of this instance was read after a list showed it stopped, and held no end
   * marker (so the stop was an outbid or a loss). Not read again until the instance starts again.
   */
  taskChecked: boolean;
  /** While its outputs are taken (`collecting`): when that stops whatever came, ms since epoch. */
  collectUntil?: number | null;
  /** While a failed task's instance is kept (`keeping`): when it is destroyed, ms since epoch; null until the keep's clock is read. */
  keepUntil?: number | null;
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
   * The attempt that ended last, for the event that reports it, and when it ended (the `settle`
   * state decides on that time whether the deadline has passed). The run's whole story lives in the
   * attempts table, not here: a snapshot stays small however many offers a run goes through.
   */
  lastEnded: EndedAttempt | null;
  searchRetryAt: number | null;
  cancelRequested: boolean;
  /** Set when the run must fail once its instance is gone (deadline reached while creating). */
  endReason: RunError | null;
  /** Set by EXPIRE (runtime or budget reached): the run ends `expired` once its instance is gone. */
  expire: RunError | null;
  /** Offers searched for: a bid run that is outbid with on_outbid "on_demand" switches for good. */
  searchType: 'on-demand' | 'bid';
  error: RunError | null;
  /** Task runs: attempts whose task exited non-zero and was started again (at most maxRestarts). */
  taskRestarts: number;
  /** Task runs: the exit code of the last task that ended, or null. */
  taskExit: number | null;
  /** Task runs: that exit code is the user's onstart's, which ended non-zero before the task started. */
  taskOnstart: boolean;
}

export type RunEvent =
  | { type: 'ADMIT' }
  /**
   * From the user (`berth cancel`). `at`: when it was asked (a task with outputs has them taken
   * until files.outputs_timeout_s from then); `now`: destroy without taking them (`--no-outputs`,
   * or a second cancel). A cancel carried again from the store has neither.
   */
  | { type: 'CANCEL'; at?: number; now?: boolean }
  /** From the shared poller: the current instance as listed, or null when the list lacks it. */
  | { type: 'POLL'; instance: InstanceStatus | null; listedAt: number }
  /** From the daemon's money guard: the run's max_runtime_s or budget_usd is reached. */
  | { type: 'EXPIRE'; reason: RunError }
  /** From the readiness callback, token already checked by the daemon: attempt n's onstart has run. */
  | { type: 'READY'; n: number }
  /**
   * From the daemon's task probe (src/daemon/task-end/task-probe.ts): attempt n's log holds its end
   * marker while its instance still runs (an image without curl or wget cannot stop itself).
   */
  | { type: 'TASK_END'; n: number; exitCode: number; onstart: boolean; at: number; workdir?: boolean; workdirRefused?: string };

/** Events the machine reports; the daemon writes them to the run's event log with the snapshot. */
export type RunEmitted =
  | { type: 'search.started'; relaxLevel: number }
  | { type: 'search.found'; relaxLevel: number; count: number }
  | { type: 'search.retry'; error: RunError; retryAt: number }
  | { type: 'relaxed'; level: number }
  | { type: 'attempt.started'; n: number; offerId: number; machineId: number; dphTotal: number }
  | { type: 'attempt.instance'; n: number; instanceId: number }
  | { type: 'attempt.status'; n: number; status: InstanceStatus }
  | {
      type: 'attempt.ended';
      n: number;
      offerId: number;
      machineId: number;
      instanceId: number | null;
      outcome: AttemptOutcome;
      detail: string;
    }
  | {
      type: 'attempt.running';
      n: number;
      status: InstanceStatus;
      reachable: Endpoint[] | null;
      via: 'ssh' | 'status' | 'callback';
      /** Ready by SSH: whether berth logged in and ran a command, or why it took the banner alone. */
      login?: LoginOutput;
    }
  /** The instance is being destroyed because its attempt ended (its logs can still be asked for). */
  | { type: 'attempt.ending'; n: number; instanceId: number; outcome: AttemptOutcome; detail: string }
  /** `dphTotal`: what the instance is billed from now on, $/h (the new bid plus the disk): the money guard's new price. */
  | { type: 'bid.raised'; n: number; instanceId: number; price: number; dphTotal: number }
  | { type: 'search.switched'; to: 'on-demand' }
  | { type: 'destroy.requested'; n: number; instanceId: number }
  | { type: 'destroy.retry'; n: number; instanceId: number; error: RunError; retryAt: number }
  | { type: 'destroy.confirmed'; n: number; instanceId: number }
  /** The instance went to a warm hold instead of its destroy (issue #51). */
  | { type: 'instance.warm'; n: number; instanceId: number; holdId: number; idleUntil: number }
  | { type: 'run.failed'; error: RunError }
  | { type: 'run.expired'; error: RunError }
  | { type: 'run.cancelled' }
  /** A task's end marker was read: its exit code decides how the run (or the attempt) ends. */
  | { type: 'task.ended'; n: number; instanceId: number; exitCode: number }
  | { type: 'run.succeeded' }
  /** The task's outputs are being taken from its instance before the destroy (GPU time, billed), until `until`. */
  | { type: 'outputs.started'; n: number; instanceId: number; until: number }
  /** What the collect came to (its manifest is in the store's run_outputs). */
  | { type: 'outputs.ended'; n: number; instanceId: number; result: CollectOutput }
  /** The collect was stopped before it finished (time budget, a limit, a cancel, an error): what came is kept, partial. */
  | { type: 'outputs.cut'; n: number; instanceId: number; why: string }
  /** A limit was reached while the outputs are taken: they go on until `until` at most (the documented rule, docs/money.md). */
  | { type: 'outputs.over_limit'; n: number; instanceId: number; reason: RunError; until: number }

  /** A task that failed for good keeps its instance for SSH until `until` (keep_on_failure_s), billing meanwhile. */
  | { type: 'task.kept'; n: number; instanceId: number; until: number }
  /** The keep ended before its bound (a cancel, a limit, the instance gone): it is destroyed now. */
  | { type: 'task.keep_ended'; n: number; instanceId: number; why: string };

// ---- actor contracts (implemented in src/daemon/runs/run-actors.ts) ----
/** The candidates left from the last search, in its order: those the run's remaining budget can pay to boot (a SearchOutput). */
export interface AffordInput {
  runId: string;
  candidates: Candidate[];
}
export interface SearchInput {
  runId: string;
  relaxLevel: number;
  blockedOffers: number[];
  blockedMachines: number[];
  searchType: 'on-demand' | 'bid';
}
export interface SearchOutput {
  candidates: Candidate[];
  /** Set when offers matched but the run's remaining budget cannot pay for any of them to boot. */
  exhausted?: RunError;
  /** Set when nothing is usable after the last relax step: what excluded the offers, in words (the no_offers error says it). */
  noOffers?: string;
}
/** Everything the attempt's journal row needs (the label is the store's: the actor derives it). */
export interface CreateInput {
  runId: string;
  n: number;
  offerId: number;
  machineId: number;
  /** $/h billed, as the search priced it for this run. */
  dphTotal: number;
  /** $/h compute bid for an interruptible instance; null on-demand. */
  bidPrice: number | null;
  /** The GPUs the offer rents; null when unknown. */
  gpu: OfferGpu | null;
}
/** What a create came to. */
export type CreateResult =
  /**
   * `createdStopped`: the service made the instance but said it failed (an on-demand create answered
   * `success: false` naming it: a stopped contract, dstack #4036); it goes at once, why in it.
   */
  | { kind: 'created'; instanceId: number; createdAt: number; createdStopped?: string }
  | { kind: 'offer_gone'; detail: string }
  | { kind: 'create_failed'; detail: string };
/**
 * The create actor's output: its result and `at`, when it settled (ms since epoch). `createdAt` may
 * be earlier: a create journaled by an earlier process.
 */
export type CreateOutput = CreateResult & { at: number };
export interface DestroyInput {
  runId: string;
  n: number;
  instanceId: number;
  /** Why the instance goes: for a failed attempt the actor asks for its container's logs first. */
  outcome: AttemptOutcome | null;
}
export interface DestroyOutput {
  requestedAt: number;
  /**
   * The instance was not destroyed: it went to a warm hold for the next run of the same reuse key
   * (issue #51), which holds it from then on; the attempt ends with its outcome and the run settles.
   */
  handed?: { holdId: number; idleUntil: number };
}
export interface SleepInput {
  until: number;
}
/** When the sleeper woke (at or after `until`; later after a restart). */
export interface SleepOutput {
  at: number;
}
/** Tries the endpoints (paced, one probe in flight per instance) until one answers with an SSH banner. */
export interface ProbeInput {
  runId: string;
  n: number;
  instanceId: number;
  endpoints: Endpoint[];
}
export interface ProbeOutput {
  /** Every endpoint that answered (at least one). */
  reachable: Endpoint[];
}
/**
 * Once an endpoint answered with a banner: logs in with berth's key (the direct address first, the
 * proxy otherwise) and runs a command, tried again until `until`. Never fails the run: a login that
 * does not work by then, or cannot (no usable key, a changed host key), resolves with why.
 */
export interface LoginInput {
  runId: string;
  n: number;
  instanceId: number;
  /** The endpoints that answered with a banner. */
  endpoints: Endpoint[];
  /** The SSH deadline (readiness.ssh_timeout_s from running, within the boot deadline), ms. */
  until: number;
}
/** `ok`: berth logged in and a command ran (exit 0); else the banner alone, and why (`code`: the ssh room's error code). */
export type LoginOutput = { ok: true } | { ok: false; code: string; why: string };
/**
 * Waits until the boot deadline, then looks once more at the instance (one list filtered on it): the
 * last list the run saw may be older than the deadline, and the instance running since. When that
 * look shows it running and readiness is by SSH, its endpoints get one SSH try.
 */
export interface BootDeadlineInput {
  runId: string;
  n: number;
  instanceId: number;
  until: number;
  readyWhen: ReadyWhen;
}
export interface BootDeadlineOutput {
  /** When the deadline was met (the time of the look). */
  at: number;
  /** What the last look saw; null when no list answered in time. */
  look: LastLook | null;
}
export interface LastLook {
  /** The instance as that list showed it; null when it did not. */
  instance: InstanceStatus | null;
  /** The endpoints that answered the SSH try; null when none was tried or none answered. */
  reachable: Endpoint[] | null;
}
/** Reads the end marker of attempt n's task from its container's log (via the service's logs endpoint). */
export interface TaskEndInput {
  runId: string;
  n: number;
  instanceId: number;
  /**
   * Read a limit was reached on while the instance may still bill its GPU: the read gives up (no
   * marker) after this long, its rate token's wait included, so the limit's destroy is not held
   * back for long. Absent: the instance is stopped (disk only), and the read waits as long as it takes.
   */
  withinMs?: number;
  /**
   * The list shows the instance stopped from inside (intended_status stopped, which berth never
   * sets: the task's wrapper stops it at its end). It bills only its disk, so its log is read for
   * minutes (src/daemon/task-end/task-logs.ts) before the read says it could not be.
   */
  stoppedByTask?: boolean;
}
export interface TaskEndOutput {
  /** The task's exit code, or null when the log holds no end marker of this attempt. */
  exitCode: number | null;
  /** The user's onstart ended non-zero, so the task never started (the marker's `stage=onstart`). */
  onstart?: boolean;
  /** The task's workdir did not arrive in time, so the task never started (the marker's `stage=workdir`). */
  workdir?: boolean;
  /** No log could be read at all (no upload came, or no container): the exit code is unknown, not absent. */
  unread?: boolean;
  /** When the read ended: a stop judged afterwards dates from here (when berth learned of it). */
  at: number;
}
export interface ChangeBidInput {
  runId: string;
  n: number;
  instanceId: number;
  /** New compute bid, $/h. */
  price: number;
  /** What the instance bills at that bid, $/h (the bid plus the disk): the caps check this. */
  dphTotal: number;
}

/**
 * Takes attempt n's outputs before its instance is destroyed: downloaded over SFTP, or copied by the
 * service to a cloud connection (the instance stopped first). Writes its intent and manifest to the
 * store itself; an abort (a limit, a cancel, the time budget) keeps what came, marked partial.
 */
export interface CollectInput {
  runId: string;
  n: number;
  instanceId: number;
  /** When the machine stops the collect (ms since epoch): the actor bounds its own waits by it. */
  until: number;
  /** The last list showed the instance stopped (its task stopped it): nothing can be downloaded from it. */
  stopped: boolean;
  /** The task had not ended (a cancel or a limit): it is stopped first, TERM then KILL after a grace. Absent: it ended. */
  stopTask?: true;
}
export interface CollectOutput {
  /** kept: every path came whole; partial: some came (the size cap, a missing path); failed: nothing came; copied: the cloud copy finished. */
  state: 'kept' | 'partial' | 'failed' | 'copied';
  files: number;
  bytes: number;
  /** Why, in words (what was missing, the cap reached, the copy's destination). */
  detail: string;
  /** How long the transfer held the instance, ms (GPU time, in the run's spend). */
  tookMs: number;
}
