// Price increases hosts asked for on the account's running contracts: read them, answer one.
import { ServiceHttpError } from '../errors.js';
import { parseBody, pendingPriceIncreaseSchema, pendingPriceIncreasesResponseSchema } from './records.js';
import type { ServiceCaller } from './service-call.js';
import type { MarketplaceClient, PendingPriceIncrease } from './types.js';

export function priceIncreaseCalls({ call }: ServiceCaller): Pick<MarketplaceClient, 'pendingPriceIncreases' | 'answerPriceIncrease'> {
  return {
    async pendingPriceIncreases(opts) {
      const path = '/api/v0/instances/pending-price-increases/';
      const res = await call({ op: 'price_increases', group: 'other', method: 'GET', path, signal: opts?.signal });
      const body = parseBody(pendingPriceIncreasesResponseSchema, res.body, `GET ${path}`);
      const rows: PendingPriceIncrease[] = [];
      let malformed = 0;
      for (const item of body.pending_price_increases ?? []) {
        const row = pendingPriceIncreaseSchema.safeParse(item);
        if (row.success) rows.push(row.data);
        else malformed++;
      }
      return { rows, truncated: body.truncated === true, malformed };
    },

    async answerPriceIncrease(pendingId, answer, opts) {
      // The body is exactly {pending_price_increase_id} (the service forbids extra keys). Answering
      // twice is harmless: a row already answered is stale (404 no_pending_price_increase; 409 on
      // older backends), so a retry after a lost answer ends as 'stale'.
      const path = `/api/v0/instances/${answer}-price-increase/`;
      try {
        await call({
          op: `price_increase_${answer}`,
          group: 'change',
          method: 'PUT',
          path,
          body: { pending_price_increase_id: pendingId },
          signal: opts?.signal,
        });
        return 'done';
      } catch (err) {
        if (err instanceof ServiceHttpError && (err.status === 404 || err.status === 409)) return 'stale';
        throw err;
      }
    },
  };
}
