// The real side effects of one run, given to the run machine with `provide`. Each is safe to
// repeat: xstate re-runs an invoked promise that was in flight when a snapshot was taken, so every
// create first reads its journal row (written, and committed, before the call) and, when a call
// may already have reached the service, looks for the attempt's label instead of calling again.
// What a failed create means (skip the offer, look for the label, fail the run...) is the policy
// table's call (src/client/retry-policy.ts RUN_POLICY), not this file's.
import { fromPromise } from 'xstate';
import { isRunningStatus, sshEndpoints } from '../../../machines/run-rules.js';
import type {
  AffordInput,
  BootDeadlineInput,
  BootDeadlineOutput,
  Candidate,
  ChangeBidInput,
  ProbeInput,
  ProbeOutput,
  CreateInput,
  CreateOutput,
  CreateResult,
  DestroyInput,
  DestroyOutput,
  SearchInput,
  SearchOutput,
  SleepInput,
  SleepOutput,
  TaskEndInput,
  TaskEndOutput,
} from '../../../machines/run-machine.js';
import { runPolicyOf } from '../../client/retry-policy.js';
import type { Instance, MarketClient, Offer } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import { BerthError, toRunError } from '../../errors.js';
import { encodeOnstart, encodeOnstartWith } from '../../job-spec/onstart.js';
import { taskScript } from '../../job-spec/task-script.js';
import type { TaskLogs } from './task-logs.js';
import type { RunPlan, TaskPlan } from '../../job-spec/run-plan.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import { billedPriceFor, buildSearchQuery, diskPricePerHour, relaxStepCount, usableOffers } from '../../job-spec/search-query.js';
import { noOffersWhy, uncappedQuery } from '../../job-spec/no-offers-why.js';
import type { AttemptRow } from '../../store/index.js';
import type { AttemptJournal } from './attempt-journal.js';
import type { RunOwnership } from '../cluster/run-ownership.js';
import { CreateAbandoned, type CreateGate } from '../money/create-gate.js';
import type { MoneyGuard } from '../money/money-guard.js';
import type { FailureLogs } from './failure-logs.js';
import type { LogSecrets } from './log-secrets.js';
import { callbackLine, type ReadyTokens } from '../inbound/ready-token.js';
import { probeOnce, probeUntilReachable } from './ssh-probe.js';
import { asRunActor } from './actor-failure.js';
import { toStatus } from './instance-status.js';
import type { OfferClaims } from './offer-claims.js';
import { SearchPool } from './search-pool.js';
import type { InstanceLists } from '../fleet/poller.js';
import type { MachineQuarantine } from './machine-quarantine.js';

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
  /** Reads a stopped task's end marker from its log (runs with `run`). */
  taskLogs: Pick<TaskLogs, 'readEnd'>;
  /** Where an instance's own key goes once a create answers with it, so its logs are scrubbed of it. */
  logSecrets: Pick<LogSecrets, 'noteInstanceKey' | 'forget'>;
  /** The service's base URL (service.base_url): where a task's wrapper stops its own instance. */
  serviceUrl: string;
  /**
   * Whether this daemon still holds the run (several daemons on one store): asked before a destroy
   * or a bid change is sent. A create's fence is its journaled intent (the journal's write).
   */
  ownership: Pick<RunOwnership, 'check'>;
}

/**
 * The backstop's grace: a task's wrapper destroys its own instance this long after the run's limit
 * (max_runtime_s, or what budget_usd buys at the attempt's price) has passed, should no daemon have
 * ended it by then. Long enough that a live daemon, which ends the run within a poll interval of the
 * limit, always acts first.
 */
const BACKSTOP_GRACE_S = 600;

/** The money room's two checks, as the actors use them. */
interface MoneyPort {
  /** The candidates the run's remaining budget can pay to boot (../money/money-guard.ts). */
  guard: Pick<MoneyGuard, 'affordable' | 'bidRefusal' | 'left'>;
  /** The daemon-wide caps and the credit floor a create waits for, its intent journaled in the same step (../money/create-gate.ts). */
  gate: Pick<CreateGate, 'admit' | 'bidHold'>;
}

/**
 * A raised bid is a path to money like a create: it passes the same caps (max_usd_per_hour,
 * max_usd_per_day, the run's budget) or is not sent. Refused, the actor fails, and the machine
 * ends the attempt as outbid with this reason (the run fails over: ../../../machines/run-instance-states.ts).
 */
function bidRefusal(money: MoneyPort, input: ChangeBidInput): BerthError | null {
  const why = money.gate.bidHold(input)?.message ?? money.guard.bidRefusal(input.runId, input.dphTotal);
  return why === null
    ? null
    : new BerthError('over_cap', `a bid of $${input.price.toFixed(3)}/h would bill $${input.dphTotal.toFixed(3)}/h: ${why}`);
}

/** The plan of a run whose actor is running: a driver exists for every live run, so it is there. */
function specOf(deps: RunActorDeps, runId: string): RunPlan {
  const spec = deps.specs.get(runId);
  if (!spec) throw new Error(`no spec for run ${runId}`);
  return spec;
}

/** Lists the label is looked for in, spread over the grace period. */
const RECONCILE_LISTS = 3;

/**
 * Looks for the attempt's label in lists started after the create may have happened (label look-ups
 * by the shared poller, so many look-ups cost one call); adopts the instance if it is there, or
 * records that it is not.
 */
async function reconcileCreate(deps: RunActorDeps, input: CreateInput, sentAt: number, signal: AbortSignal): Promise<CreateResult> {
  const label = deps.journal.labelOf(input.runId, input.n);
  for (let i = 0; i < RECONCILE_LISTS; i++) {
    const found = await deps.lists.findLabel(label, deps.clock.now(), signal);
    if (found) return adopted(deps, input, found.id, sentAt);
    if (i < RECONCILE_LISTS - 1) await deps.clock.sleep(deps.reconcileGraceMs / (RECONCILE_LISTS - 1), signal);
  }
  const detail = `create outcome unknown and no instance labelled ${label} appeared`;
  deps.journal.notCreated(input.runId, input.n, 'failed', detail);
  return { kind: 'create_failed', detail };
}

function adopted(deps: RunActorDeps, input: CreateInput, instanceId: number, sentAt: number): CreateResult {
  if (!deps.journal.adopt(input.runId, input.n, instanceId, sentAt)) {
    // The attempt holds another instance or gave up: this one is an orphan, and the sweep destroys it.
    return { kind: 'create_failed', detail: `instance ${instanceId} surfaced after attempt #${input.n} had moved on` };
  }
  return { kind: 'created', instanceId, createdAt: deps.clock.now() };
}

/** A create an earlier process (or an earlier run of this actor) journaled: what it recorded stands. */
function journaled(deps: RunActorDeps, input: CreateInput, row: AttemptRow, signal: AbortSignal): Promise<CreateResult> | CreateResult {
  deps.claims.claim(input.offerId, input.runId);
  switch (row.create_state) {
    case 'created':
      return { kind: 'created', instanceId: row.instance_id!, createdAt: row.instance_created_at ?? row.started_at };
    case 'offer_gone':
      return { kind: 'offer_gone', detail: row.create_detail ?? 'offer gone' };
    case 'failed':
      return { kind: 'create_failed', detail: row.create_detail ?? 'create failed' };
    case 'intent':
      // The call may have been sent: look for the label, never call again.
      return reconcileCreate(deps, input, row.started_at, signal);
  }
}

async function create(deps: RunActorDeps, input: CreateInput, signal: AbortSignal): Promise<CreateResult> {
  const { client, journal, claims } = deps;
  const spec = specOf(deps, input.runId);
  const { runId, n, offerId } = input;
  const before = journal.find(runId, n);
  if (before) return journaled(deps, input, before, signal);
  /**
   * The intent, and on a shared store the look at other runs' attempts on the offer, in one step
   * (the gate's, under the store's caps lock): of two daemons going for one offer, the second sees
   * the first's intent and moves on without a create call. `taken`: why it moved on.
   */
  const start = () => {
    const begun = journal.begin(input, deps.clock.now());
    const holder = begun.fresh ? claims.holderInStore(offerId, runId) : undefined;
    const taken = holder === undefined ? undefined : `offer ${offerId} is being tried by run ${holder}`;
    if (taken !== undefined) journal.notCreated(runId, n, 'offer_gone', taken);
    return { ...begun, taken };
  };
  let begun: ReturnType<typeof start>;
  try {
    // The money guard's gate comes before the intent: a create it holds back has sent nothing.
    begun = await deps.money.gate.admit(input, signal, start);
  } catch (err) {
    if (!(err instanceof CreateAbandoned)) throw err;
    // Recorded like any attempt that made nothing, so the run's story lists it.
    journal.begin(input, deps.clock.now());
    journal.notCreated(runId, n, 'failed', err.message);
    return { kind: 'create_failed', detail: err.message };
  }
  const { row, fresh, taken } = begun;
  if (!fresh) return journaled(deps, input, row, signal);
  if (taken !== undefined) return { kind: 'offer_gone', detail: taken };
  if (!claims.claim(offerId, runId)) {
    // Another run of this daemon is on this offer: move on without spending a create call.
    const detail = `offer ${offerId} is being tried by run ${claims.heldByOther(offerId, runId)} of this daemon`;
    journal.notCreated(runId, n, 'offer_gone', detail);
    return { kind: 'offer_gone', detail };
  }
  const sentAt = deps.clock.now();
  const onstart = onstartFor(deps, spec, input);
  let instanceId: number;
  let instanceApiKey: string | undefined;
  try {
    ({ instanceId, instanceApiKey } = await client.createInstance(
      offerId,
      {
        image: spec.image,
        disk: spec.disk_gb,
        label: row.label,
        ...(onstart.script ? { onstart: onstart.script } : {}),
        ...(onstart.secret ? { secrets: [onstart.secret] } : {}),
        ...(spec.env ? { env: spec.env } : {}),
        // The machine decides the attempt's bid (the spec's price, or the offer's min_bid): null on-demand.
        price: input.bidPrice,
        runtype: 'ssh_direc ssh_proxy',
      },
      { signal },
    ));
  } catch (err) {
    const detail = toRunError(err).message;
    switch (runPolicyOf(err).create) {
      case 'skip_offer':
        journal.notCreated(runId, n, 'offer_gone', detail);
        return { kind: 'offer_gone', detail };
      case 'reconcile':
        return reconcileCreate(deps, input, sentAt, signal);
      case 'end_attempt':
        journal.notCreated(runId, n, 'failed', detail);
        return { kind: 'create_failed', detail };
      case 'fail_run':
        journal.notCreated(runId, n, 'failed', detail);
        throw err;
      case 'stop':
        // The daemon is stopping: the journal stays 'intent' and the next start looks for the label.
        throw err;
    }
  }
  deps.logSecrets.noteInstanceKey(instanceId, instanceApiKey);
  return adopted(deps, input, instanceId, sentAt);
}

/**
 * The onstart to send: the spec's script, followed (with readiness.callback_url) by the line that
 * posts this attempt's token once it has run. `secret`: the token, which service text must not show.
 */
function onstartFor(deps: RunActorDeps, spec: RunPlan, input: CreateInput): { script?: string | undefined; secret?: string } {
  const { runId, n } = input;
  if (spec.task) return taskOnstartFor(deps, spec, spec.task, input);
  const user = spec.onstart ? encodeOnstart(spec.onstart) : undefined;
  if (!deps.readyCallback) return { script: user };
  const token = deps.readyCallback.tokens.tokenFor(runId, n);
  // A script that only just fits the service's limit leaves no room: it goes alone (SSH still tells readiness).
  const script = encodeOnstartWith(spec.onstart, callbackLine(deps.readyCallback.url, token)) ?? user;
  return { script, secret: token };
}

/**
 * The boot deadline: sleeps until it, then looks once more at the instance (one list filtered on
 * its id; the last list the run saw may be older than the deadline: lists are spaced, and shared
 * with sweep pages) and, running with readiness by SSH, tries its endpoints once. `look` is null
 * when no list answered within the grace (an outage): the run then judges by what it last saw.
 */
async function bootDeadline(deps: RunActorDeps, input: BootDeadlineInput, signal: AbortSignal): Promise<BootDeadlineOutput> {
  await deps.clock.sleepUntil(input.until, signal);
  const at = deps.clock.now();
  const listed = await lookWithin(deps, input.instanceId, signal);
  if (listed === undefined) return { at, look: null };
  const instance = listed ? toStatus(listed) : null;
  const running = instance !== null && isRunningStatus(instance);
  const reachable = running && input.readyWhen === 'ssh' ? await probeOnce(sshEndpoints(instance), signal) : [];
  return { at, look: { instance, reachable: reachable.length > 0 ? reachable : null } };
}

/** The instance as one list filtered on it shows it (null: absent); undefined when none answered within the grace. */
function lookWithin(deps: RunActorDeps, instanceId: number, signal: AbortSignal): Promise<Instance | null | undefined> {
  const giveUp = new AbortController();
  const onAbort = () => giveUp.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  return new Promise<Instance | null | undefined>((resolve, reject) => {
    const timer = deps.clock.setTimer(() => {
      giveUp.abort();
      resolve(undefined);
    }, deps.reconcileGraceMs);
    deps.lists.lookAt(instanceId, deps.clock.now(), giveUp.signal).then(
      (found) => {
        timer.cancel();
        resolve(found);
      },
      (err: unknown) => {
        timer.cancel();
        if (signal.aborted) reject(err);
        else resolve(undefined);
      },
    );
  }).finally(() => signal.removeEventListener('abort', onAbort));
}

/**
 * A task's onstart: the user's script, the readiness callback (when it still fits) and the task
 * wrapper (src/job-spec/task-script.ts), compressed together when long. Validation made sure the
 * wrapper fits without the callback line.
 */
function taskOnstartFor(deps: RunActorDeps, spec: RunPlan, task: TaskPlan, input: CreateInput): { script: string; secret?: string } {
  const base = {
    onstart: spec.onstart,
    run: task.run,
    runId: input.runId,
    n: input.n,
    serviceUrl: deps.serviceUrl,
    backstop: backstopOf(deps, spec, input),
  };
  if (deps.readyCallback) {
    const token = deps.readyCallback.tokens.tokenFor(input.runId, input.n);
    try {
      return { script: encodeOnstart(taskScript({ ...base, callbackLine: callbackLine(deps.readyCallback.url, token) })), secret: token };
    } catch {
      // Too long with the callback line: readiness falls back to SSH (or the status).
    }
  }
  return { script: encodeOnstart(taskScript(base)) };
}

/**
 * When the task's wrapper destroys its own instance should no daemon end the run first: what is
 * left of the run's limits at this create (issue #29: a later attempt gets what the earlier ones
 * left, not the whole limits), plus the grace. The runtime left counts from the instance's running,
 * so the boot timeout is added to it; the budget left counts from the create, as the service bills.
 * Null when the run has neither limit.
 */
function backstopOf(deps: RunActorDeps, spec: RunPlan, input: CreateInput): { atS: number; madeAtS: number } | null {
  const left = deps.money.guard.left(input.runId);
  const waits: number[] = [];
  if (left.runtimeS !== null) waits.push(left.runtimeS + spec.boot_timeout_s);
  if (left.usd !== null && input.dphTotal > 0) waits.push((left.usd / input.dphTotal) * 3600);
  if (waits.length === 0) return null;
  const madeAtS = deps.clock.now() / 1000;
  return { atS: madeAtS + Math.min(...waits) + BACKSTOP_GRACE_S, madeAtS };
}

export function makeRunActors(deps: RunActorDeps) {
  const { client } = deps;
  const shareMs = deps.searchShareMs;
  const pool =
    shareMs > 0
      ? new SearchPool({
          search: (query, signal) => client.searchOffers(query, { signal }),
          clock: deps.clock,
          claims: deps.claims,
          maxAgeMs: shareMs,
          perAnswer: deps.offersPerSearch,
        })
      : undefined;
  const now = () => deps.clock.now();
  /** An actor whose rejection reaches the machine with its verdict and its time (./actor-failure.ts). */
  const actor = <O, I>(work: (args: { input: I; signal: AbortSignal }) => Promise<O>) =>
    fromPromise<O, I>(({ input, signal }) => asRunActor(() => work({ input, signal }), now));
  return {
    // A fail-over's candidates, checked again when chosen: the budget left shrank since the search.
    affordCandidates: actor<SearchOutput, AffordInput>(async ({ input }) => deps.money.guard.affordable(input.runId, input.candidates)),

    searchOffers: actor<SearchOutput, SearchInput>(async ({ input, signal }) => {
      const stored = specOf(deps, input.runId);
      // A bid run outbid with on_outbid "on_demand" searches (and is priced) on-demand from then on.
      const spec =
        input.searchType === stored.search.type
          ? stored
          : { ...stored, search: { ...stored.search, type: input.searchType }, bid_price: undefined };
      const blocked = { offerIds: input.blockedOffers, machineIds: input.blockedMachines };
      /**
       * Nothing usable after the last relax step ends the run (no_offers): one more search, without the
       * price cap, says what excluded the offers (../../job-spec/no-offers-why.ts). Once per failing run,
       * through the search limiter like any search; if it fails, the run fails without the reason.
       */
      const explained = async (out: SearchOutput): Promise<SearchOutput> => {
        if (out.candidates.length > 0 || out.exhausted || input.relaxLevel < relaxStepCount(spec)) return out;
        const uncapped = await client.searchOffers(uncappedQuery(spec, input.relaxLevel, blocked), { signal }).catch(() => undefined);
        return uncapped === undefined ? out : { ...out, noOffers: noOffersWhy(spec, uncapped) };
      };
      /** The run's candidates from the offers it may use, in order: quarantined machines last, then what its budget pays. */
      const choose = (usable: Offer[]): SearchOutput => {
        const candidates: Candidate[] = deps.quarantine
          .lastIfQuarantined(usable, (o) => o.machine_id)
          .map((o) => ({
            offerId: o.id,
            machineId: o.machine_id,
            // What the instance will be billed (its disk included), not the search's quote.
            dphTotal: billedPriceFor(o, spec) ?? o.dph_total,
            minBid: typeof o['min_bid'] === 'number' ? o['min_bid'] : null,
            diskDph: diskPricePerHour(o, spec.disk_gb) ?? 0,
            gpu: { name: o.gpu_name, count: o.num_gpus },
          }));
        return deps.money.guard.affordable(input.runId, candidates);
      };
      if (!pool) {
        // runs.search_share_s 0: the run searches for itself, offers sibling runs are trying left out.
        const query = buildSearchQuery(spec, input.relaxLevel, {
          offerIds: [...input.blockedOffers, ...deps.claims.heldByOthers(input.runId)],
          machineIds: input.blockedMachines,
        });
        const offers = await client.searchOffers(query, { signal });
        return explained(
          choose(usableOffers(offers, spec, blocked).filter((o) => deps.claims.heldByOther(o.id, input.runId) === undefined)),
        );
      }
      // One shared answer (./search-pool.ts); the run is handed one offer at a time, so that no
      // other run tries it, and asks again for the next one.
      const shared = await pool.offersFor(
        {
          runId: input.runId,
          spec,
          relaxLevel: input.relaxLevel,
          blocked,
          choose: (usable) => {
            const out = choose(usable);
            const first = out.candidates.slice(0, 1);
            return { take: first.map((c) => c.offerId), result: { ...out, candidates: first } };
          },
        },
        signal,
      );
      return explained(shared);
    }),

    createInstance: actor<CreateOutput, CreateInput>(async ({ input, signal }) => ({ ...(await create(deps, input, signal)), at: now() })),

    destroyInstance: actor<DestroyOutput, DestroyInput>(async ({ input, signal }) => {
      // A failed container's log is asked for first: once destroyed it has none (bounded, never throws).
      await deps.failureLogs.beforeDestroy(input, signal);
      deps.ownership.check(input.runId);
      deps.logSecrets.forget(input.instanceId);
      await client.destroyInstance(input.instanceId, { signal });
      return { requestedAt: deps.clock.now() };
    }),

    probeSsh: actor<ProbeOutput, ProbeInput>(async ({ input, signal }) => ({
      reachable: await probeUntilReachable(input.endpoints, deps.clock, signal),
    })),

    readTaskEnd: actor<TaskEndOutput, TaskEndInput>(({ input, signal }) => deps.taskLogs.readEnd(input, signal)),

    changeBid: actor<void, ChangeBidInput>(async ({ input, signal }) => {
      const refused = bidRefusal(deps.money, input);
      if (refused) throw refused;
      deps.ownership.check(input.runId);
      await client.changeBid(input.instanceId, input.price, { signal });
    }),

    bootDeadline: actor<BootDeadlineOutput, BootDeadlineInput>(({ input, signal }) => bootDeadline(deps, input, signal)),

    // Any length: a deadline weeks away must not fire at once (setTimeout's 24.8-day limit).
    sleepUntil: fromPromise<SleepOutput, SleepInput>(async ({ input, signal }) => {
      await deps.clock.sleepUntil(input.until, signal);
      return { at: now() };
    }),
  };
}
