// The real side effects of one run, given to the run machine with `provide`. Each is safe to
// repeat: xstate re-runs an invoked promise that was in flight when a snapshot was taken, so every
// create first reads its journal row (written, and committed, before the call) and, when a call
// may already have reached the service, looks for the attempt's label instead of calling again.
import { fromPromise } from 'xstate';
import type {
  Candidate,
  ChangeBidInput,
  ProbeInput,
  ProbeOutput,
  CreateInput,
  CreateOutput,
  DestroyInput,
  DestroyOutput,
  SearchInput,
  SearchOutput,
  SleepInput,
} from '../../machines/run-machine.js';
import type { MarketClient } from '../client/types.js';
import type { Clock } from '../clock.js';
import { describeError, isBerthError } from '../errors.js';
import { encodeOnstart } from '../job-spec/onstart.js';
import type { ResolvedJobSpec } from '../job-spec/schema.js';
import { billedPriceFor, buildSearchQuery, diskPricePerHour, usableOffers } from '../job-spec/search-query.js';
import type { Store } from '../store/index.js';
import { attemptLabel } from './labels.js';
import { probeUntilReachable } from './ssh-probe.js';
import type { OfferClaims } from './offer-claims.js';
import type { InstanceLists } from './poller.js';
import type { MachineQuarantine } from './machine-quarantine.js';

export interface RunActorDeps {
  client: MarketClient;
  clock: Clock;
  store: Store;
  /** The resolved spec of a live run (one set of actors serves every run of the daemon). */
  specOf(runId: string): ResolvedJobSpec;
  /** How long to keep looking for the label of a create whose outcome is unknown. */
  reconcileGraceMs: number;
  /** Offers other runs of this daemon are trying: skipped, not raced for. */
  claims: OfferClaims;
  /** Instance lists from the shared poller. */
  lists: InstanceLists;
  /** Machines that recently failed any run: tried last. */
  quarantine: MachineQuarantine;
}

/**
 * Looks for the attempt's label in lists started after the create may have happened (label look-ups
 * by the shared poller, so many look-ups cost one call); adopts the instance if it is there, or
 * records that it is not.
 */
async function reconcileCreate(
  deps: RunActorDeps,
  input: CreateInput,
  label: string,
  signal: AbortSignal,
): Promise<CreateOutput> {
  const { store } = deps;
  const tries = 3;
  for (let i = 0; i < tries; i++) {
    const found = await deps.lists.findLabel(label, deps.clock.now(), signal);
    if (found) {
      store.attempts.markCreated(input.runId, input.n, found.id);
      return { kind: 'created', instanceId: found.id, createdAt: deps.clock.now() };
    }
    if (i < tries - 1) await deps.clock.sleep(deps.reconcileGraceMs / (tries - 1), signal);
  }
  const detail = `create outcome unknown and no instance labelled ${label} appeared`;
  store.attempts.markCreateResult(input.runId, input.n, 'failed', detail);
  return { kind: 'create_failed', detail };
}

async function create(deps: RunActorDeps, input: CreateInput, signal: AbortSignal): Promise<CreateOutput> {
  const { client, store } = deps;
  const spec = deps.specOf(input.runId);
  const label = attemptLabel(store.storeId, input.runId, input.n);
  const { row, fresh } = store.attempts.beginCreate({
    runId: input.runId,
    n: input.n,
    offerId: input.offerId,
    machineId: null,
    dphTotal: null,
    label,
    at: deps.clock.now(),
  });
  if (fresh && !deps.claims.claim(input.offerId, input.runId)) {
    // Another run of this daemon is on this offer: move on without spending a create call.
    const detail = `offer ${input.offerId} is being tried by run ${deps.claims.heldByOther(input.offerId, input.runId)} of this daemon`;
    store.attempts.markCreateResult(input.runId, input.n, 'offer_gone', detail);
    return { kind: 'offer_gone', detail };
  }
  if (!fresh) {
    deps.claims.claim(input.offerId, input.runId);
    switch (row.create_state) {
      case 'created':
        return { kind: 'created', instanceId: row.instance_id!, createdAt: row.started_at };
      case 'offer_gone':
        return { kind: 'offer_gone', detail: row.create_detail ?? 'offer gone' };
      case 'failed':
        return { kind: 'create_failed', detail: row.create_detail ?? 'create failed' };
      case 'intent':
        // An earlier process journaled this create and may have sent it.
        return reconcileCreate(deps, input, label, signal);
    }
  }
  try {
    const created = await client.createInstance(
      input.offerId,
      {
        image: spec.image,
        disk: spec.disk_gb,
        label,
        ...(spec.onstart ? { onstart: encodeOnstart(spec.onstart) } : {}),
        ...(spec.env ? { env: spec.env } : {}),
        // The machine decides the attempt's bid (the spec's price, or the offer's min_bid): null on-demand.
        price: input.bidPrice,
        runtype: 'ssh_direc ssh_proxy',
      },
      { signal },
    );
    store.attempts.markCreated(input.runId, input.n, created.instanceId);
    return { kind: 'created', instanceId: created.instanceId, createdAt: deps.clock.now() };
  } catch (err) {
    if (!isBerthError(err)) throw err;
    switch (err.code) {
      case 'offer_gone':
      // A 403 about this one offer ("not your own"): the offer is blocked and the run moves on,
      // like a gone offer; only a permission 403 fails the run.
      case 'offer_refused':
        store.attempts.markCreateResult(input.runId, input.n, 'offer_gone', err.message);
        return { kind: 'offer_gone', detail: err.message };
      case 'ambiguous':
        return reconcileCreate(deps, input, label, signal);
      case 'auth':
      case 'permission':
        store.attempts.markCreateResult(input.runId, input.n, 'failed', err.message);
        throw err;
      case 'aborted':
        // The daemon is stopping: the journal stays 'intent' and the next start looks for the label.
        throw err;
      default: {
        const detail = describeError(err).message;
        store.attempts.markCreateResult(input.runId, input.n, 'failed', detail);
        return { kind: 'create_failed', detail };
      }
    }
  }
}

export function makeRunActors(deps: RunActorDeps) {
  const { client, store } = deps;
  return {
    searchOffers: fromPromise<SearchOutput, SearchInput>(async ({ input, signal }) => {
      const stored = deps.specOf(input.runId);
      // A bid run outbid with on_outbid "on_demand" searches (and is priced) on-demand from then on.
      const spec =
        input.searchType === stored.search.type
          ? stored
          : { ...stored, search: { ...stored.search, type: input.searchType }, bid_price: undefined };
      const blocked = { offerIds: input.blockedOffers, machineIds: input.blockedMachines };
      // Offers sibling runs are trying are left out of the query, so the search returns others.
      const query = buildSearchQuery(spec, input.relaxLevel, {
        offerIds: [...input.blockedOffers, ...deps.claims.heldByOthers(input.runId)],
        machineIds: input.blockedMachines,
      });
      const offers = await client.searchOffers(query, { signal });
      const usable = usableOffers(offers, spec, blocked).filter((o) => deps.claims.heldByOther(o.id, input.runId) === undefined);
      const candidates: Candidate[] = deps.quarantine
        .lastIfQuarantined(usable, (o) => o.machine_id)
        .map((o) => ({
          offerId: o.id,
          machineId: o.machine_id,
          // What the instance will be billed (its disk included), not the search's quote.
          dphTotal: billedPriceFor(o, spec) ?? o.dph_total,
          minBid: typeof o['min_bid'] === 'number' ? o['min_bid'] : null,
          diskDph: diskPricePerHour(o, spec.disk_gb) ?? 0,
        }));
      return { candidates };
    }),

    createInstance: fromPromise<CreateOutput, CreateInput>(({ input, signal }) => create(deps, input, signal)),

    destroyInstance: fromPromise<DestroyOutput, DestroyInput>(async ({ input, signal }) => {
      store.attempts.setDestroyState(input.runId, input.n, 'requested');
      await client.destroyInstance(input.instanceId, { signal });
      return { requestedAt: deps.clock.now() };
    }),

    probeSsh: fromPromise<ProbeOutput, ProbeInput>(async ({ input, signal }) => ({
      reachable: await probeUntilReachable(input.endpoints, deps.clock, signal),
    })),

    changeBid: fromPromise<void, ChangeBidInput>(({ input, signal }) => client.changeBid(input.instanceId, input.price, { signal })),

    // Any length: a deadline weeks away must not fire at once (setTimeout's 24.8-day limit).
    sleepUntil: fromPromise<void, SleepInput>(({ input, signal }) => deps.clock.sleepUntil(input.until, signal)),
  };
}
