// Offers and renting them: GPU names, search, and instance creation on an offer.
import { gpuNames } from '../catalog.js';
import type { Route, RouteContext, RouteResult } from '../router.js';
import { searchOffers } from '../search.js';
import { askGone, invalidArgs, invalidPrice, unknownAsk } from '../sim-error.js';
import { bump } from '../stats.js';
import { bodyObject, idParam, num, str, stringMap } from '../validate.js';

/** The documented onstart limit; longer scripts must be compressed by the client. */
const ONSTART_MAX = 4048;

function create(ctx: RouteContext): RouteResult {
  const { world } = ctx;
  const offerId = idParam(ctx.params, 'offer_id');
  const body = bodyObject(ctx.body);
  world.stats.creates_received++;
  bump(world.stats.creates_by_label, typeof body.label === 'string' ? body.label : '');

  const image = str(body, 'image', { required: true, max: 1024 });
  const disk = num(body, 'disk', { min: 1 }) ?? 10;
  const label = str(body, 'label', { max: 1024 }) ?? null;
  const env = stringMap(body, 'env') ?? {};
  const onstart = str(body, 'onstart') ?? '';
  if (onstart.length > ONSTART_MAX) {
    throw invalidArgs(`onstart is ${onstart.length} characters; the limit is ${ONSTART_MAX} (gzip and base64 longer scripts).`);
  }
  const runtype = str(body, 'runtype') ?? 'ssh';
  const price = num(body, 'price', { min: 0 }) ?? null;
  str(body, 'client_id');
  str(body, 'template_hash_id');

  const offer = world.catalog.get(offerId);
  if (!offer) throw unknownAsk(offerId);
  if (world.catalog.isRented(offerId)) throw askGone(offerId);
  if (world.faults.offerTaken()) {
    // Someone else rented it between this client's search and its create.
    world.catalog.rent(offerId, 0);
    world.stats.offers_taken++;
    throw askGone(offerId);
  }
  if (price !== null && price < offer.min_bid) {
    throw invalidPrice(`bid price ${price} is below the minimum bid ${offer.min_bid} for offer ${offerId}.`);
  }

  const profile = world.profiles.profileFor(offer.id, offer.machine_id);
  const inst = world.instances.create(offer, { image, disk, label, env, onstart, runtype, price }, profile);
  world.catalog.rent(offer.id, inst.hist.id);
  world.webhooks.emit('instance_created', { instance_id: inst.hist.id, machine_id: offer.machine_id, label });

  if (world.faults.ambiguousCreate()) {
    world.stats.creates_ambiguous++;
    return { drop: true };
  }
  world.stats.creates_answered++;
  return { body: { success: true, new_contract: inst.hist.id, instance_api_key: inst.apiKey } };
}

export const marketRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v0/gpu_names/unique',
    auth: 'none',
    handler: () => ({ body: { gpu_names: gpuNames().sort() } }),
  },
  {
    method: 'POST',
    path: '/api/v0/bundles',
    auth: 'key',
    category: 'misc',
    group: 'search',
    handler: ({ world, body }) => ({
      body: { offers: searchOffers(world.catalog, bodyObject(body, true), world.config.search) },
    }),
  },
  // The service documents PUT and its overview also names POST for the same path.
  ...(['PUT', 'POST'] as const).map(
    (method): Route => ({ method, path: '/api/v0/asks/{offer_id}', auth: 'key', category: 'instance_write', group: 'create', handler: create }),
  ),
];
