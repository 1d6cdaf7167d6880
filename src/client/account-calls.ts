// What the account holds, read: the user (credit), its SSH keys, its secrets' names and its charges.
import { countText } from '../count-text.js';
import { BerthError } from '../errors.js';
import { MAX_V1_PAGES } from './instance-list.js';
import { ItemReport, keepValid } from './record-items.js';
import {
  chargeSchema,
  chargesResponseSchema,
  currentUserSchema,
  parseBody,
  secretsResponseSchema,
  sshKeySchema,
  sshKeysResponseSchema,
} from './records.js';
import type { ServiceCaller } from './service-call.js';
import type { Charge, MarketplaceClient } from './types.js';

export function accountCalls({
  call,
  emit,
  reportItems,
}: ServiceCaller): Pick<MarketplaceClient, 'currentUser' | 'countSshKeys' | 'listSecrets' | 'charges'> {
  return {
    async currentUser(opts) {
      const res = await call({ op: 'current_user', group: 'other', method: 'GET', path: '/api/v0/users/current/', signal: opts?.signal });
      return parseBody(currentUserSchema, res.body, 'GET /api/v0/users/current/');
    },

    async countSshKeys(opts) {
      const res = await call({ op: 'ssh_keys', group: 'other', method: 'GET', path: '/api/v0/ssh/', signal: opts?.signal });
      const report = new ItemReport();
      const keys = keepValid(sshKeySchema, parseBody(sshKeysResponseSchema, res.body, 'GET /api/v0/ssh/'), 'keys', report);
      reportItems('ssh_keys', 'other', report);
      return keys.length;
    },

    async listSecrets(opts) {
      const res = await call({ op: 'secrets', group: 'other', method: 'GET', path: '/api/v0/secrets/', signal: opts?.signal });
      const { secrets: all } = parseBody(secretsResponseSchema, res.body, 'GET /api/v0/secrets/');
      const kept: Record<string, string> = {};
      let dropped = 0;
      for (const [name, value] of Object.entries(all)) {
        if (typeof value === 'string') kept[name] = value;
        else dropped++;
      }
      if (dropped > 0) {
        emit({
          type: 'malformed_records',
          op: 'secrets',
          group: 'other',
          dropped,
          repaired: 0,
          issues: [`secrets: ${countText(dropped, 'value')} not a string`],
        });
      }
      return kept;
    },

    async charges(range, opts) {
      const all: Charge[] = [];
      const seen = new Set<string>();
      let token: string | null = null;
      for (let page = 0; page < MAX_V1_PAGES; page++) {
        const params = new URLSearchParams({
          select_filters: JSON.stringify({ day: { gte: Math.floor(range.fromS), lte: Math.floor(range.toS) }, type: { in: ['instance'] } }),
          limit: '500',
        });
        if (token) params.set('after_token', token);
        const res = await call({
          op: 'charges',
          group: 'other',
          method: 'GET',
          path: `/api/v0/charges/?${params.toString()}`,
          signal: opts?.signal,
        });
        const body = parseBody(chargesResponseSchema, res.body, 'GET /api/v0/charges/');
        const report = new ItemReport();
        all.push(...keepValid(chargeSchema, body.results, 'results', report));
        reportItems('charges', 'other', report);
        token = body.next_token ?? null;
        if (!token) return all;
        if (seen.has(token)) throw new BerthError('bad_response', 'The charges report repeated a page token.');
        seen.add(token);
      }
      throw new BerthError('bad_response', `The charges report did not end after ${MAX_V1_PAGES} pages.`);
    },
  };
}
