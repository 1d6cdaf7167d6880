// Offers: searching them, and renting one (a create). A create is the one call that must never run
// twice: once it may have reached the service, an unknown outcome is AmbiguousCreateError at once,
// and the caller looks for the instance by its label before anything else.
import { AmbiguousCreateError, BerthError } from '../errors.js';
import { normalizeOffer } from './normalize.js';
import { ItemReport, keepValid } from './record-items.js';
import { createResponseSchema, offerSchema, parseBody, searchResponseSchema } from './records.js';
import type { ServiceCaller } from './service-call.js';
import type { MarketplaceClient } from './types.js';

/** A create's answer that names the instance it made, whatever its `success` says. */
function namesNewContract(body: unknown): boolean {
  const id = body !== null && typeof body === 'object' ? (body as Record<string, unknown>)['new_contract'] : undefined;
  return typeof id === 'number' && Number.isInteger(id) && id > 0;
}

export function offerCalls({
  call,
  emit,
  reportItems,
  counters,
}: ServiceCaller): Pick<MarketplaceClient, 'searchOffers' | 'createInstance'> {
  return {
    async searchOffers(query, opts) {
      const res = await call({
        op: 'search',
        group: 'search',
        method: 'POST',
        path: '/api/v0/bundles/',
        body: query,
        signal: opts?.signal,
      });
      const { offers } = parseBody(searchResponseSchema, res.body, 'POST /api/v0/bundles/');
      const report = new ItemReport();
      const usable = keepValid(offerSchema, offers.map(normalizeOffer), 'offers', report);
      reportItems('search', 'search', report);
      return usable;
    },

    async createInstance(offerId, request, opts) {
      const ambiguous = (cause: unknown): AmbiguousCreateError => {
        counters.ambiguousCreates++;
        const code = cause instanceof BerthError ? cause.code : 'ambiguous';
        emit({ type: 'ambiguous_create', offerId, label: request.label, code });
        return new AmbiguousCreateError(offerId, request.label, cause);
      };
      const body = {
        client_id: 'me',
        image: request.image,
        disk: request.disk,
        label: request.label,
        env: request.env ?? {},
        onstart: request.onstart,
        price: request.price ?? null,
        runtype: request.runtype ?? 'ssh',
      };
      const res = await call({
        op: 'create',
        group: 'create',
        method: 'PUT',
        path: `/api/v0/asks/${offerId}/`,
        body,
        offerId,
        secrets: [...Object.values(request.env ?? {}), ...(request.secrets ?? [])],
        onUnknownOutcome: ambiguous,
        // A bid the service holds pending answers 200 `{"success": false, "new_contract": N,
        // "instance_api_key"}` (seen live by another tool's author, 2026-07): the instance exists
        // and bills, and the answer names it. Taken as the create's answer (issue #30, case 3);
        // the run machine then follows the instance like any other.
        acceptUnsuccessful: namesNewContract,
        signal: opts?.signal,
      });
      let created;
      try {
        created = parseBody(createResponseSchema, res.body, `PUT /api/v0/asks/${offerId}/`);
      } catch (err) {
        // A 2xx we cannot read may still have created an instance: same as a lost answer.
        throw ambiguous(err);
      }
      return {
        instanceId: created.new_contract,
        ...(created.instance_api_key === undefined ? {} : { instanceApiKey: created.instance_api_key }),
        ...(res.unsuccessful === undefined ? {} : { unsuccessful: res.unsuccessful }),
      };
    },
  };
}
