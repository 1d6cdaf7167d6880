// Things made on the account outside any run, and removed again: API keys, a webhook's secret,
// templates. Removing what is already gone is an answer ('gone'), not a failure.
import { BerthError } from '../errors.js';
import { apiKeyResponseSchema, parseBody, rotateSecretResponseSchema } from './records.js';
import { isGone, type ServiceCaller } from './service-call.js';
import type { MarketplaceClient } from './types.js';

export function accountSetupCalls({
  call,
}: ServiceCaller): Pick<MarketplaceClient, 'deleteTemplate' | 'rotateWebhookSecret' | 'createApiKey' | 'deleteApiKey'> {
  return {
    async deleteTemplate(templateId, opts) {
      try {
        await call({
          op: 'template_delete',
          group: 'other',
          method: 'DELETE',
          path: '/api/v0/template/',
          body: { template_id: templateId },
          signal: opts?.signal,
        });
        return 'deleted';
      } catch (err) {
        if (isGone(err, 'no_such_template')) return 'gone';
        throw err;
      }
    },

    async rotateWebhookSecret(webhookId, opts) {
      // Retrying a rotation is safe: whichever rotation answered last holds the valid secret.
      const path = `/api/v0/webhooks/${webhookId}/rotate-secret`;
      const res = await call({ op: 'webhook_rotate_secret', group: 'other', method: 'POST', path, signal: opts?.signal });
      return parseBody(rotateSecretResponseSchema, res.body, `POST ${path}`).webhook;
    },

    async createApiKey(request, opts) {
      // Not idempotent: a lost answer could leave a live key behind, so it is never repeated blindly.
      const res = await call({
        op: 'api_key_create',
        group: 'other',
        method: 'POST',
        path: '/api/v0/auth/apikeys/',
        body: request,
        onUnknownOutcome: (cause) =>
          new BerthError('ambiguous', 'The API key creation may or may not have succeeded; check the key list before retrying.', { cause }),
        signal: opts?.signal,
      });
      return parseBody(apiKeyResponseSchema, res.body, 'POST /api/v0/auth/apikeys/');
    },

    async deleteApiKey(keyId, opts) {
      try {
        await call({
          op: 'api_key_delete',
          group: 'other',
          method: 'DELETE',
          path: `/api/v0/auth/apikeys/${keyId}/`,
          signal: opts?.signal,
        });
        return 'deleted';
      } catch (err) {
        if (isGone(err, 'no_such_key')) return 'gone';
        throw err;
      }
    },
  };
}
