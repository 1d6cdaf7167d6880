// The real side effects of one run, given to the run machine with `provide`. Each is safe to
// repeat: xstate re-runs an invoked promise that was in flight when a snapshot was taken. The
// create, the one whose repeat could cost money, has its own module (./create-actor.ts).
import { fromPromise } from 'xstate';
import { isRunningStatus, sshEndpoints } from '../../../machines/run-rules.js';
import type {
  AffordInput,
  BootDeadlineInput,
  BootDeadlineOutput,
  Candidate,
  ChangeBidInput,
  CollectInput,
  CollectOutput,
  LoginInput,
  LoginOutput,
  ProbeInput,
  ProbeOutput,
  CreateInput,
  CreateOutput,
  DestroyInput,
  DestroyOutput,
  SearchInput,
  SearchOutput,
  SleepInput,
  SleepOutput,
  TaskEndInput,
  TaskEndOutput,
} from '../../../machines/run-machine.js';
import type { Instance, Offer } from '../../client/types.js';
import { BerthError } from '../../errors.js';
import { billedPriceFor, buildSearchQuery, diskPricePerHour, relaxStepCount, usableOffers } from '../../job-spec/search-query.js';
import { excludedMost, marketQuery, noOffersWhy, uncappedQuery } from '../../job-spec/no-offers-why.js';
import { probeOnce, probeUntilReachable } from './ssh-probe.js';
import { loginWhenReady } from './ssh-login.js';
import { asRunActor } from './actor-failure.js';
import { toStatus } from '../instances/instance-status.js';
import { SearchPool } from './search-pool.js';
import { createAttempt } from './create-actor.js';
import { specOf, type MoneyPort, type RunActorDeps } from './run-actor-deps.js';

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
      // A warm instance of the same reuse key comes before any search (issue #51): no search call, no boot of the image.
      const warm = deps.warm?.offerFor(input.runId, spec, input.relaxLevel, blocked);
      if (warm) {
        const candidate: Candidate = {
          offerId: warm.offerId,
          machineId: warm.machineId,
          dphTotal: warm.dphTotal,
          minBid: null,
          diskDph: warm.diskDph,
          ...(warm.gpu ? { gpu: warm.gpu } : {}),
        };
        const out = deps.money.guard.affordable(input.runId, [candidate]);
        if (out.candidates.length > 0) return out;
      }
      /**
       * Nothing usable after the last relax step ends the run (no_offers): one more search, without the
       * price cap, says what excluded the offers, and when even that finds nothing, a second one, the
       * widest, names the filter that excluded the most (../../job-spec/no-offers-why.ts). Once per failing run,
       * through the search limiter like any search; if it fails, the run fails without the reason.
       */
      const explained = async (out: SearchOutput): Promise<SearchOutput> => {
        if (out.candidates.length > 0 || out.exhausted || input.relaxLevel < relaxStepCount(spec)) return out;
        const uncapped = await client.searchOffers(uncappedQuery(spec, input.relaxLevel, blocked), { signal }).catch(() => undefined);
        if (uncapped === undefined) return out;
        const why = noOffersWhy(spec, uncapped);
        if (uncapped.length > 0) return { ...out, noOffers: why };
        // The filters match nothing at any price: one more search, the widest, names the filter that excludes the most.
        const market = await client.searchOffers(marketQuery(spec), { signal }).catch(() => undefined);
        const most = market === undefined ? null : excludedMost(spec, input.relaxLevel, blocked, market);
        return { ...out, noOffers: most === null ? why : `${why}; ${most}` };
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

    createInstance: actor<CreateOutput, CreateInput>(async ({ input, signal }) => ({
      ...(await createAttempt(deps, input, signal)),
      at: now(),
    })),

    destroyInstance: actor<DestroyOutput, DestroyInput>(async ({ input, signal }) => {
      // A failed container's log is asked for first: once destroyed it has none (bounded, never throws).
      await deps.failureLogs.beforeDestroy(input, signal);
      deps.ownership.check(input.runId);
      // Kept warm for the next run of its reuse key instead, when it may be (../instances/warm-pool.ts).
      const handed = deps.warm?.handOver(input);
      if (handed) return { requestedAt: deps.clock.now(), handed };
      deps.logSecrets.forget(input.instanceId);
      await client.destroyInstance(input.instanceId, { signal });
      return { requestedAt: deps.clock.now() };
    }),

    probeSsh: actor<ProbeOutput, ProbeInput>(async ({ input, signal }) => ({
      reachable: await probeUntilReachable(input.endpoints, deps.clock, signal),
    })),

    loginSsh: actor<LoginOutput, LoginInput>(({ input, signal }) =>
      loginWhenReady({ clock: deps.clock, login: deps.logins }, input, signal),
    ),

    readTaskEnd: actor<TaskEndOutput, TaskEndInput>(({ input, signal }) => deps.taskLogs.readEnd(input, signal)),

    // A task's outputs, before its destroy (../task-files/outputs-download.ts); bounded by the machine.
    collectOutputs: actor<CollectOutput, CollectInput>(async ({ input, signal }) => {
      if (!deps.outputs) throw new BerthError('ssh_key', 'berth has no SSH login to take the outputs with.');
      return deps.outputs.collect(input, signal);
    }),

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
