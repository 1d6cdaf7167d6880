// berth's public key put where its instances take it from (docs/ssh.md says why both ways):
// - the account: listed once at daemon start and added when missing (user_write). Instances
//   created from then on take it at creation (guides/instances/connect/ssh.mdx: account keys
//   "only apply to new instances"), at no call per instance.
// - one instance: attached before berth's first login to an instance the account's key may not
//   have reached (created before the key was on the account: an adopted or resumed instance, or
//   one created while the account could not be given the key). attach_ssh needs only
//   instance_write, which berth holds anyway; a Docker instance takes a key added after its
//   creation (issue #39's seed).
// It does not log: it answers what it did, and the caller says it.
import type { Clock } from '../clock.js';
import type { MarketplaceClient } from '../client/types.js';
import { BerthError } from '../errors.js';
import { publicKeyPart, type BerthKey } from './key-pair.js';

export type KeyAccessClient = Pick<MarketplaceClient, 'listSshKeys' | 'addSshKey' | 'attachSshKey'>;

export interface KeyAccess {
  /**
   * Makes sure the account holds berth's key: `listed` (it did), `added`, or `not_allowed` (the API
   * key lacks user_write: every instance then gets the key attached instead). Other failures throw.
   */
  ensureOnAccount(signal?: AbortSignal): Promise<'listed' | 'added' | 'not_allowed'>;
  /**
   * Before the first login to an instance: attaches berth's key to it unless the account held the
   * key before the instance was created (`createdAt`, ms). One attach per instance per daemon.
   */
  prepareInstance(instanceId: number, createdAt: number, signal?: AbortSignal): Promise<'account' | 'attached'>;
}

/**
 * The service's clock (a key record's created_at) and berth's (an instance's create) may differ: an
 * instance created this soon after the key reached the account gets it attached all the same.
 */
const CLOCK_MARGIN_MS = 60_000;

export function createKeyAccess(deps: { client: KeyAccessClient; key: Pick<BerthKey, 'publicLine'>; clock: Clock }): KeyAccess {
  const { client, key, clock } = deps;
  const mine = publicKeyPart(key.publicLine);
  /** Since when (ms) the account holds berth's key, as far as this daemon knows; null: not known to. */
  let accountSince: number | null = null;
  const attached = new Map<number, Promise<'attached'>>();

  return {
    async ensureOnAccount(signal) {
      const listed = (await client.listSshKeys({ signal })).filter((k) => publicKeyPart(k.key) === mine);
      if (listed.length > 0) {
        // The record's own time when it states one: instances created since then hold the key.
        const times = listed.map((k) => k.createdAt ?? clock.now());
        accountSince = Math.min(accountSince ?? Infinity, ...times);
        return 'listed';
      }
      try {
        const before = clock.now();
        await client.addSshKey(key.publicLine, { signal });
        accountSince = before;
        return 'added';
      } catch (err) {
        if (err instanceof BerthError && err.code === 'permission') return 'not_allowed';
        throw err;
      }
    },

    async prepareInstance(instanceId, createdAt, signal) {
      if (accountSince !== null && accountSince + CLOCK_MARGIN_MS <= createdAt) return 'account';
      let once = attached.get(instanceId);
      if (!once) {
        once = client.attachSshKey(instanceId, key.publicLine, { signal }).then(() => 'attached' as const);
        attached.set(instanceId, once);
        // A failed attach is tried again at the next login.
        once.catch(() => attached.delete(instanceId));
      }
      return once;
    },
  };
}
