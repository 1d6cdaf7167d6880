// Offers and renting them: GPU names, search, and instance creation on an offer.
import { gpuNames } from '../catalog.js';
import type { Route, RouteContext, RouteResult } from '../route.js';
import { searchOffers } from '../search.js';
import { askGone, invalidArgs, notYourOwn, SimHttpError, unknownAsk, withAskId } from '../sim-error.js';
import { STATUS_MSG } from '../lifecycle.js';
import { bump } from '../stats.js';
import { bodyObject, idParam } from '../validate.js';
import { parseCreateBody } from './create-body.js';

async function create(ctx: RouteContext): Promise<RouteResult> {
  const { world } = ctx;
  // Ports first, before any check: everything after this await runs without interleaving, so two
  // creates on one offer still cannot both pass the rented check.
  const sshPorts = world.sshListeners.enabled ? await world.sshListeners.reserve() : null;
  const offerId = idParam(ctx.params, 'offer_id');
  const body = bodyObject(ctx.body);
  world.stats.creates_received++;
  bump(world.stats.creates_by_label, typeof body.label === 'string' ? body.label : '');

  let req;
  try {
    req = parseCreateBody(body, (hash) => world.templates.findByHash(hash), world.sshKeys.list().length > 0);
  } catch (err) {
    // create_instance.yaml's 400 carries the offer's id too.
    if (err instanceof SimHttpError) throw withAskId(err, offerId);
    throw err;
  }

  const offer = world.catalog.get(offerId);
  if (!offer) throw unknownAsk(offerId);
  const fault = world.profiles.offerFault(offerId);
  if (fault === 'not_your_own') throw notYourOwn(offerId);
  if (world.catalog.isRented(offerId)) throw askGone(offerId);
  if (world.faults.offerTaken()) {
    // Someone else rented it between this client's search and its create.
    world.catalog.rent(offerId, 0);
    world.stats.offers_taken++;
    throw askGone(offerId);
  }
  const { params } = req;
  if (params.disk > offer.disk_space) {
    throw withAskId(invalidArgs(`disk ${params.disk} GB is more than the offer's ${offer.disk_space} GB.`), offerId);
  }
  // create_instance.yaml: cancel_unavail defaults to false for interruptibles, true for on-demand
  // with target_state running; an offer that cannot start now is then a 410. A bid below the
  // minimum bid cannot start now either: 410 with cancel_unavail, else it is created stopped and
  // waits for its bid to win (instances.ts).
  const cancelUnavail = req.cancelUnavail ?? (params.price === null && req.targetState === 'running');
  const unavailable = fault === 'unavailable';
  const losingBid = params.price !== null && params.price < world.market.minBid(offer, world.clock.simS());
  if ((unavailable || losingBid) && cancelUnavail) throw askGone(offerId);

  const profile = world.profiles.profileFor(offer.id, offer.machine_id);
  const lostDoubleBuy = world.faults.doubleBought();
  const inst = world.instances.create(offer, params, profile, sshPorts, { detour: world.faults.bootDetour(), lostDoubleBuy });
  // Its container authorizes the account's keys as they are now (ssh-keys.ts).
  world.instanceSshKeys.created(inst.hist.id, world.sshKeys.list());
  // Another account's create on the same offer won: the offer is theirs, and stays rented after ours goes.
  if (lostDoubleBuy) {
    world.catalog.rent(offer.id, 0);
    world.stats.offers_double_bought++;
  } else world.catalog.rent(offer.id, inst.hist.id);
  if (unavailable) world.instances.stop(inst, STATUS_MSG.unavailable);
  else if (req.targetState === 'stopped') world.instances.stop(inst);
  world.webhooks.emit('client:instance_created', {
    subject: `Instance ${inst.hist.id} created`,
    message: `Instance ${inst.hist.id}${params.label ? ` (${params.label})` : ''} was created on machine ${offer.machine_id}.`,
  });

  if (world.faults.ambiguousCreate()) {
    world.stats.creates_ambiguous++;
    return { drop: true };
  }
  world.stats.creates_answered++;
  // The `pending_bid_create` quirk: the service's answer while a bid is pending (issue #30). The
  // instance exists and bills all the same.
  const pending = params.price !== null && world.config.quirks.pending_bid_create;
  return { body: { success: !pending, new_contract: inst.hist.id, instance_api_key: inst.apiKey } };
}

export const marketRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v0/gpu_names/unique',
    auth: 'none',
    group: 'gpu_names',
    handler: () => ({ body: { gpu_names: gpuNames().sort() } }),
  },
  {
    method: 'POST',
    path: '/api/v0/bundles',
    auth: 'key',
    category: 'misc',
    group: 'search',
    badKey404: true,
    handler: ({ world, body }) => {
      world.syncMinBids();
      return { body: { offers: searchOffers(world.catalog, bodyObject(body, true), world.config.search) } };
    },
  },
  // The service documents PUT and its overview also names POST for the same path.
  ...(['PUT', 'POST'] as const).map((method): Route => ({
    method,
    path: '/api/v0/asks/{offer_id}',
    auth: 'key',
    category: 'instance_write',
    group: 'create',
    limited: 'detail',
    handler: create,
  })),
];
