// What the run actors are handed (one set serves every run of the daemon), apart from
// ./run-actors.ts so that the create (./create-actor.ts) can take it without an import cycle.
import type { RunPlan } from '../../job-spec/run-plan.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import type { MarketClient } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import type { AttemptJournal } from './attempt-journal.js';
import type { RunOwnership } from '../cluster/run-ownership.js';
import type { CreateGate } from '../money/create-gate.js';
import type { MoneyGuard } from '../money/money-guard.js';
import type { FailureLogs } from '../task-end/failure-logs.js';
import type { LogSecrets } from '../task-end/log-secrets.js';
import type { ReadyTokens } from '../inbound/ready-token.js';
import type { TaskLogs } from '../task-end/task-logs.js';
import type { CollectInput, CollectOutput } from '../../../machines/run-machine.js';
import type { OfferClaims } from './offer-claims.js';
import type { InstanceLists } from '../instances/poller.js';
import type { WarmPool } from '../instances/warm-pool.js';
import type { MachineQuarantine } from './machine-quarantine.js';
import type { AttemptLogins } from '../task-end/task-shells.js';

export interface RunActorDeps {
  client: MarketClient;
  clock: Clock;
  journal: AttemptJournal;
  /** The resolved specs of the live runs (one set of actors serves every run of the daemon). */
  specs: RunSpecs;
  /**
   * How long a look-up through the shared lists may take: a create whose outcome is unknown is
   * looked for by label this long, and the last look at a boot deadline waits this long at most.
   */
  reconcileGraceMs: number;
  /** Offers other runs are trying (this daemon's, and on a shared store other daemons'): skipped, not raced for. */
  claims: OfferClaims;
  /** Instance lists from the shared poller. */
  lists: InstanceLists;
  /** Machines that recently failed any run: tried last. */
  quarantine: MachineQuarantine;
  /** Asks a failed attempt's container for its last log lines before its destroy. */
  failureLogs: Pick<FailureLogs, 'beforeDestroy'>;
  /** Set when readiness.callback_url is: each attempt's onstart ends with a line posting its token there. */
  readyCallback?: { url: string; tokens: ReadyTokens };
  /** How long one search answer serves runs making the same query, ms (`runs.search_share_s`); 0: each run searches alone. */
  searchShareMs: number;
  /** Offers a run is handed from one shared answer before it waits for the next search (`runs.gone_offers_per_search`). */
  offersPerSearch: number;
  /** The money checks every search, create and bid passes. */
  money: MoneyPort;
  /** Takes a task's outputs before its destroy (runs with `outputs`); absent: berth cannot log in, none are taken. */
  outputs?: {
    collect(input: CollectInput, signal: AbortSignal): Promise<CollectOutput>;
    /** files.outputs_timeout_s: how long a task's wrapper keeps its instance running for them at its end. */
    waitS: number;
  };
  /** Reads a stopped task's end marker from its log (runs with `run`). */
  taskLogs: Pick<TaskLogs, 'readEnd'>;
  /** Where an instance's own key goes once a create answers with it, so its logs are scrubbed of it. */
  logSecrets: Pick<LogSecrets, 'noteInstanceKey' | 'forget'>;
  /** The service's base URL (service.base_url): where a task's wrapper stops its own instance. */
  serviceUrl: string;
  /** How long a task's wrapper waits for its workdir before its attempt fails over, s (files.upload_timeout_s; default 600). */
  uploadTimeoutS: number;
  /**
   * Whether this daemon still holds the run (several daemons on one store): asked before a destroy
   * or a bid change is sent. A create's fence is its journaled intent (the journal's write).
   */
  ownership: Pick<RunOwnership, 'check'>;
  /** Logins to an attempt's instance with berth's key (readiness by SSH runs a command over one); absent: no key, the banner alone. */
  logins?: AttemptLogins;
  /** Warm instances (issue #51): kept at a clean end instead of destroyed, taken instead of a create. */
  warm?: WarmPool;
}

/** The money room's two checks, as the actors use them. */
export interface MoneyPort {
  /** The candidates the run's remaining budget can pay to boot (../money/money-guard.ts). */
  guard: Pick<MoneyGuard, 'affordable' | 'bidRefusal' | 'left'>;
  /** The daemon-wide caps and the credit floor a create waits for, its intent journaled in the same step (../money/create-gate.ts). */
  gate: Pick<CreateGate, 'admit' | 'bidHold'>;
}

/** The plan of a run whose actor is running: a driver exists for every live run, so it is there. */
export function specOf(deps: RunActorDeps, runId: string): RunPlan {
  const spec = deps.specs.get(runId);
  if (!spec) throw new Error(`no spec for run ${runId}`);
  return spec;
}
