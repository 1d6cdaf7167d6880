// The `malformed_record` fault: the first record of a search, instance list or show answer is
// sent broken, the rest as usual, so that a client's handling of one bad record among good ones is
// tested against a real server. Only the answer on the wire changes; the world is untouched.
import type { RateGroup } from './config.js';
import type { FaultConfig } from './config.js';

type Malformed = Exclude<FaultConfig['malformed_record'], 'none'>;

/** The body with its first offer or instance record broken the way `kind` says (a copy; the original is kept). */
export function malformFirstRecord(group: RateGroup, body: unknown, kind: Malformed): unknown {
  if (body === null || typeof body !== 'object') return body;
  const answer = body as Record<string, unknown>;
  if (group === 'search' && Array.isArray(answer.offers) && answer.offers.length > 0) {
    const [first, ...rest] = answer.offers as Record<string, unknown>[];
    return { ...answer, offers: [breakOffer(first!, kind), ...rest] };
  }
  if ((group === 'list_v0' || group === 'list_v1') && Array.isArray(answer.instances) && answer.instances.length > 0) {
    const [first, ...rest] = answer.instances as Record<string, unknown>[];
    return { ...answer, instances: [breakInstance(first!, kind), ...rest] };
  }
  if (group === 'show' && answer.instances !== null && typeof answer.instances === 'object') {
    return { ...answer, instances: breakInstance(answer.instances as Record<string, unknown>, kind) };
  }
  return body;
}

function breakOffer(offer: Record<string, unknown>, kind: Malformed): Record<string, unknown> {
  if (kind === 'number_as_string') return { ...offer, dph_total: String(offer.dph_total) };
  const { dph_total: _d, gpu_ram: _g, ...rest } = offer;
  return rest;
}

function breakInstance(record: Record<string, unknown>, kind: Malformed): Record<string, unknown> {
  if (kind === 'number_as_string')
    return typeof record.dph_total === 'number' ? { ...record, dph_total: String(record.dph_total) } : record;
  const { id: _id, ...rest } = record;
  return rest;
}
