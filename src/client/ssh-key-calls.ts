// berth's SSH public key put where its instances take it from: the account's keys (read and added)
// and one instance's (attached). The calls and bodies are the official client's
// (vast-ai/vast-cli vastai/api/keys.py: show_ssh_keys, create_ssh_key, attach_ssh).
// Only public keys travel here; the private key never reaches the client.
import { ItemReport, keepValid } from './record-items.js';
import { parseBody, sshKeySchema, sshKeysResponseSchema } from './records.js';
import type { ServiceCaller } from './service-call.js';
import type { MarketplaceClient } from './types.js';

export function sshKeyCalls({ call, reportItems }: ServiceCaller): Pick<MarketplaceClient, 'listSshKeys' | 'addSshKey' | 'attachSshKey'> {
  return {
    async listSshKeys(opts) {
      // show_ssh_keys.yaml: a bare array of {id, user_id, key, created_at, deleted_at}; user_read.
      const res = await call({ op: 'ssh_keys', group: 'other', method: 'GET', path: '/api/v0/ssh/', signal: opts?.signal });
      const report = new ItemReport();
      const keys = keepValid(sshKeySchema, parseBody(sshKeysResponseSchema, res.body, 'GET /api/v0/ssh/'), 'keys', report);
      reportItems('ssh_keys', 'other', report);
      return keys.map((k) => ({
        id: k.id,
        key: typeof k.key === 'string' ? k.key : typeof k.public_key === 'string' ? k.public_key : '',
        createdAt: timeOf(k.created_at),
      }));
    },

    async addSshKey(publicKey, opts) {
      // create_ssh_key.yaml: `{ssh_key}`; user_write (api-reference/permissions.mdx). Retried like a
      // read: a repeat after a lost answer at worst lists the same public key twice.
      await call({
        op: 'ssh_key_add',
        group: 'other',
        method: 'POST',
        path: '/api/v0/ssh/',
        body: { ssh_key: publicKey },
        signal: opts?.signal,
      });
    },

    async attachSshKey(instanceId, publicKey, opts) {
      // attach_ssh.yaml: `{ssh_key}` on one instance; instance_write, which berth holds anyway.
      // Grouped with the other writes to one instance (`change`).
      await call({
        op: 'ssh_key_attach',
        group: 'change',
        method: 'POST',
        path: `/api/v0/instances/${instanceId}/ssh/`,
        body: { ssh_key: publicKey },
        // The server's own spec (the preview of service-facts "Added 2026-12-01") answers 200
        // `success: false` for a key already attached: the key is there, which is what was asked.
        // Any other `success: false` (an unknown instance) fails, not retried (retry-policy.ts).
        acceptUnsuccessful: saysAlreadyAttached,
        signal: opts?.signal,
      });
    },
  };
}

/** A `success: false` whose words say the key is already on the instance. */
function saysAlreadyAttached(body: unknown): boolean {
  const b = body !== null && typeof body === 'object' ? (body as Record<string, unknown>) : {};
  return [b['error'], b['msg']].some((v) => typeof v === 'string' && /already/i.test(v));
}

/** created_at: an ISO time (show_ssh_keys.yaml) or unix seconds; null when neither. */
function timeOf(v: unknown): number | null {
  if (typeof v === 'number' && Number.isFinite(v)) return v * 1000;
  if (typeof v === 'string') {
    const t = Date.parse(v);
    return Number.isNaN(t) ? null : t;
  }
  return null;
}
