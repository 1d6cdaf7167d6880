// Who is calling and what they may do. Keys come from `Authorization: Bearer KEY` or, for older
// clients, `?api_key=KEY`. A user key has a permission set (null = full access); an instance key
// (`instance_api_key`) may only start, stop or destroy its own instance, which the instance routes
// check themselves.
import type { IncomingMessage } from 'node:http';
import type { ApiKeyStore } from './api-keys.js';
import type { Permissions } from './config.js';

export type Principal = { kind: 'user'; keyId: number; permissions: Permissions | null } | { kind: 'instance'; instanceId: number };

export function presentedKey(req: IncomingMessage, query: URLSearchParams): string | undefined {
  const header = req.headers.authorization;
  if (header) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return m ? m[1] : undefined;
  }
  return query.get('api_key') ?? undefined;
}

export function authenticate(
  key: string | undefined,
  keys: ApiKeyStore,
  instanceKeyOwner: (key: string) => number | undefined,
): Principal | undefined {
  if (!key) return undefined;
  const rec = keys.find(key);
  if (rec) return { kind: 'user', keyId: rec.id, permissions: rec.permissions };
  const instanceId = instanceKeyOwner(key);
  return instanceId === undefined ? undefined : { kind: 'instance', instanceId };
}

export function hasCategory(p: Principal, category: string): boolean {
  if (p.kind === 'instance') return false;
  return p.permissions === null || Object.hasOwn(p.permissions.api, category);
}

/**
 * Identity for rate limiting, as rate-limits-and-errors.mdx defines it: bearer token + `api_key`
 * query param + client address (there are no sessions here). It does not depend on the key being
 * valid, so requests with a bad key are limited too.
 */
export function identityKey(req: IncomingMessage, query: URLSearchParams): string {
  return [req.headers.authorization ?? '', query.get('api_key') ?? '', req.socket.remoteAddress ?? '?'].join('\u0000');
}

/** Whether a key with `own` may mint a key with `wanted` (no escalation through key creation). */
export function mayGrant(own: Permissions | null, wanted: Permissions | null): boolean {
  if (own === null) return true;
  if (wanted === null) return false;
  return Object.keys(wanted.api).every((c) => Object.hasOwn(own.api, c));
}
