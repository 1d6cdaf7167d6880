// The account checks of `berth doctor`, also run by the daemon at start: the service answers, the
// key is valid, it holds every permission category berth calls, berth's SSH login key is usable
// (and whether the account holds it yet), and the credit is above account.min_credit_usd. One
// result per check, in that order.
//
// Permissions are probed with harmless calls, since the service does not say which categories a
// key holds (show_api_keys.yaml documents no permissions in the record):
//   user_read       GET users/current (also the key, the SSH key and the credit)
//   misc            a search for one offer
//   instance_read   a list filtered on an instance id no account has yet (PROBE_INSTANCE_ID)
//   instance_write  a destroy of that id, sent only when the list showed it is not this account's:
//                   a key with instance_write is told "not found", one without it gets 403
//   billing_read    the charges of today (optional: only `berth costs` reconciles with them)
// A 403 names the missing category; a 401 (or `auth_error`) is a rejected key.
import type { Charge } from '../client/marketplace-client.js';
import type { CurrentUser, MarketClient } from '../client/types.js';
import type { Config } from '../config/schema.js';
import { BerthError, toRunError } from '../errors.js';
import { publicKeyPart, type BerthKey } from '../ssh/key-pair.js';
import { creditOf } from './credit.js';

/** Far above any instance id the service has handed out (about 3 × 10^7 in 2026), and within int32. */
const PROBE_INSTANCE_ID = 2_147_483_647;

/** The categories berth needs (docs/money.md: a scoped key holding only these works), and the optional one. */
const REQUIRED_CATEGORIES = ['misc', 'user_read', 'instance_read', 'instance_write'] as const;
const WHAT_NEEDS = {
  misc: 'offer search needs it',
  user_read: "the account checks (credit, berth's SSH key on the account) need it",
  instance_read: 'the instance list berth polls needs it',
  instance_write: 'create, destroy and change-bid need it',
} as const;

type CheckName = 'service' | 'key' | 'permissions' | 'ssh_key' | 'credit';

interface CheckResult {
  name: CheckName;
  ok: boolean;
  message: string;
}

export interface AccountReport {
  checks: CheckResult[];
  ok: boolean;
  /** The users/current answer, when it came. */
  user?: CurrentUser;
  /** Required categories the key lacks. */
  missing: string[];
  /** The key was rejected, or lacks a category: the auth exit code. */
  authFailed: boolean;
}

export interface CheckClient extends Pick<MarketClient, 'currentUser' | 'searchOffers' | 'listInstancePage' | 'destroyInstance'> {
  listSshKeys(options?: { signal?: AbortSignal | undefined }): Promise<Array<{ key: string }>>;
  charges(range: { fromS: number; toS: number }, options?: { signal?: AbortSignal | undefined }): Promise<Charge[]>;
}

type Probe = 'ok' | 'missing' | 'rejected' | { error: string; unreachable: boolean };

const UNREACHABLE = new Set(['network', 'timeout', 'server_error', 'rate_limited']);

async function probe(call: () => Promise<unknown>): Promise<Probe> {
  try {
    await call();
    return 'ok';
  } catch (err) {
    if (err instanceof BerthError && err.code === 'permission') return 'missing';
    if (err instanceof BerthError && err.code === 'auth') return 'rejected';
    if (err instanceof BerthError && err.code === 'aborted') throw err;
    const { kind, message } = toRunError(err);
    return { error: `${kind}: ${message}`, unreachable: UNREACHABLE.has(kind) };
  }
}

export async function checkAccount(
  client: CheckClient,
  config: Pick<Config, 'service' | 'account'>,
  now: number,
  options: {
    signal?: AbortSignal;
    billing?: boolean;
    /** berth's SSH login key, loaded (made on first need); throws `ssh_key` when it cannot be used. */
    loginKey?: () => BerthKey;
  } = {},
): Promise<AccountReport> {
  const { signal } = options;
  const checks: CheckResult[] = [];
  const add = (name: CheckName, ok: boolean, message: string) => checks.push({ name, ok, message });
  const report = (extra: Partial<AccountReport> = {}): AccountReport => ({
    checks,
    ok: checks.every((c) => c.ok),
    missing: [],
    authFailed: false,
    ...extra,
  });
  const where = config.service.base_url;

  let user: CurrentUser | undefined;
  const first = await probe(async () => (user = await client.currentUser({ signal })));
  if (typeof first === 'object' && first.unreachable) {
    add('service', false, `${where} does not answer (${first.error})`);
    return report();
  }
  add('service', true, `${where} answers`);
  if (first === 'rejected') {
    add('key', false, 'the service rejected the API key: check BERTH_API_KEY (a typo, or a deleted, reset or expired key)');
    return report({ authFailed: true });
  }
  if (typeof first === 'object') {
    add('key', false, `could not be checked: users/current failed (${first.error})`);
    return report();
  }
  add(
    'key',
    true,
    user ? `accepted${user.id === undefined ? '' : ` (user ${user.id})`}` : 'accepted (it may not read users/current: see permissions)',
  );

  const found: Record<string, Probe> = { user_read: first };
  found.misc = await probe(() => client.searchOffers({ limit: 1 }, { signal }));
  let probeIdListed = true;
  found.instance_read = await probe(async () => {
    const page = await client.listInstancePage({ filters: { id: { eq: PROBE_INSTANCE_ID } } }, { signal });
    probeIdListed = page.instances.some((i) => i.id === PROBE_INSTANCE_ID);
  });
  // Never a destroy of anything that could be this account's: only once the list said the id is not.
  found.instance_write =
    found.instance_read === 'ok' && !probeIdListed
      ? await probe(() => client.destroyInstance(PROBE_INSTANCE_ID, { signal }))
      : { error: 'not checked: instance_read is needed first', unreachable: false };
  const day = Math.floor(now / 86_400_000) * 86_400;
  // Optional: the daemon leaves it out (it reads charges only for `berth costs`).
  const billing =
    options.billing === false ? null : await probe(() => client.charges({ fromS: day, toS: Math.floor(now / 1000) }, { signal }));
  if (Object.values(found).includes('rejected')) {
    add('permissions', false, 'the service rejected the API key on some calls: check BERTH_API_KEY');
    return report({ authFailed: true, ...(user ? { user } : {}) });
  }

  const missing = REQUIRED_CATEGORIES.filter((c) => found[c] === 'missing');
  const unknown = REQUIRED_CATEGORIES.filter((c) => typeof found[c] === 'object').map(
    (c) => `${c} (${(found[c] as { error: string }).error})`,
  );
  const billingText =
    billing === null
      ? 'billing_read not checked (optional: only `berth costs` uses it)'
      : billing === 'ok'
        ? "billing_read too (`berth costs` compares with the service's charges)"
        : billing === 'missing'
          ? "billing_read missing: optional, only `berth costs` uses it to compare with the service's charges"
          : `billing_read not known (${typeof billing === 'object' ? billing.error : billing}): optional`;
  if (missing.length > 0) {
    add(
      'permissions',
      false,
      `the key lacks ${missing.map((c) => `${c} (${WHAT_NEEDS[c]})`).join(', ')}: use a key holding ${REQUIRED_CATEGORIES.join(', ')}; ${billingText}`,
    );
  } else if (unknown.length > 0) {
    add('permissions', false, `could not check ${unknown.join(', ')}; ${billingText}`);
  } else {
    add('permissions', true, `${REQUIRED_CATEGORIES.join(', ')}: every category berth calls; ${billingText}`);
  }

  const keyCheck = await loginKeyCheck(client, options.loginKey, user !== undefined, signal);
  add('ssh_key', keyCheck.ok, keyCheck.message);
  if (!user) {
    add('credit', false, 'not checked (needs user_read)');
    return report({ missing, authFailed: missing.length > 0 });
  }
  const credit = creditOf(user);
  const min = config.account.min_credit_usd;
  if (credit === null) add('credit', false, 'users/current states no credit');
  else if (credit < min)
    add(
      'credit',
      false,
      `$${credit.toFixed(2)} is below account.min_credit_usd ($${min.toFixed(2)}): no create starts until the account is topped up`,
    );
  else add('credit', true, `$${credit.toFixed(2)}, above account.min_credit_usd ($${min.toFixed(2)})`);
  return report({ user, missing, authFailed: missing.length > 0 });
}

/**
 * berth's login key: usable (its file is private, unencrypted, a private key), and on the account.
 * A key not on the account yet passes: the daemon adds it at start, or attaches it to each instance
 * when the API key may not add account keys (docs/ssh.md).
 */
async function loginKeyCheck(
  client: CheckClient,
  loginKey: (() => BerthKey) | undefined,
  canReadKeys: boolean,
  signal: AbortSignal | undefined,
): Promise<{ ok: boolean; message: string }> {
  if (!loginKey) return { ok: true, message: 'not checked here' };
  let key: BerthKey;
  try {
    key = loginKey();
  } catch (err) {
    if (err instanceof BerthError && err.code === 'ssh_key') return { ok: false, message: err.message };
    throw err;
  }
  const usable = `berth's SSH key ${key.path} (${key.fingerprint}) is usable`;
  if (!canReadKeys) return { ok: false, message: `${usable}; whether the account holds it is not checked (needs user_read)` };
  const mine = publicKeyPart(key.publicLine);
  try {
    const keys = await client.listSshKeys({ signal });
    if (keys.some((k) => publicKeyPart(k.key) === mine)) return { ok: true, message: `${usable} and on the account` };
    return {
      ok: true,
      message: `${usable}; not on the account yet: the daemon adds it at its start (or attaches it to each instance when the API key lacks user_write)`,
    };
  } catch (err) {
    if (err instanceof BerthError && err.code === 'aborted') throw err;
    return { ok: true, message: `${usable}; the account's keys could not be read (${toRunError(err).message})` };
  }
}

/** `ok    service      https://... answers` for people. */
export function checkLines(report: AccountReport): string[] {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  return report.checks.map((c) => `${c.ok ? 'ok  ' : 'FAIL'}  ${c.name.padEnd(width)}  ${c.message}`);
}
