// The account: user record (show_user.yaml), secrets (show/create/update/delete_env_var.yaml),
// SSH keys (show/create/update/delete_ssh_key.yaml) and API keys (show/create/delete_api_key.yaml).
import { mayGrant } from '../auth.js';
import type { Permissions } from '../config.js';
import type { Route, RouteContext, RouteResult } from '../route.js';
import { invalidArgs, permissionDenied, SimHttpError } from '../sim-error.js';
import { bodyObject, idParam, str, type Json } from '../validate.js';

/**
 * show_user.yaml: `{id, key_id, email, balance, ssh_key, sid}` "excluding the API key". The
 * official CLI's `show user` does `user_blob.pop("api_key")`, which fails without the field, so
 * `api_key` is present and always null: the key's value is never echoed.
 */
function currentUser({ world, principal }: RouteContext): RouteResult {
  const { account } = world.config;
  const credit = Math.round(world.credit() * 100) / 100;
  return {
    body: {
      id: account.user_id,
      key_id: principal?.kind === 'user' ? principal.keyId : null,
      api_key: null,
      username: account.email.split('@')[0],
      email: account.email,
      fullname: 'Simulated User',
      balance: credit,
      credit,
      ssh_key: world.sshKeys.latest(),
      sid: `sim-${world.config.seed}`,
      can_pay: true,
      has_billing: true,
      email_verified: true,
    },
  };
}

const fail = (status: number, error: string, msg: string) => new SimHttpError(status, { success: false, error, msg });

/** update_env_var.yaml's key pattern; keys are stored in upper case. */
const SECRET_KEY = /^[A-Za-z_]\w*$/;
const SECRET_KEY_MAX = 255;
/** create_env_var.yaml's value pattern. */
const SECRET_VALUE = /^[a-zA-Z0-9_\-.]+$/;
const SECRET_VALUE_MAX = 4096;

function secretKey(o: Json): string {
  const key = o.key;
  if (typeof key !== 'string' || key === '') throw fail(400, 'missing_input', "Both 'key' and 'value' are required.");
  if (key.length > SECRET_KEY_MAX) throw fail(400, 'input_too_long', `key is longer than ${SECRET_KEY_MAX} characters.`);
  if (!SECRET_KEY.test(key))
    throw fail(400, 'invalid_characters', 'key must start with a letter or underscore, followed by letters, digits or underscores.');
  return key.toUpperCase();
}

function secretValue(o: Json): string {
  const value = o.value;
  if (typeof value !== 'string') throw fail(400, 'missing_input', "Both 'key' and 'value' are required.");
  if (value === '') throw fail(400, 'empty_input', 'value must not be empty.');
  if (value.length > SECRET_VALUE_MAX) throw fail(400, 'input_too_long', `value is longer than ${SECRET_VALUE_MAX} characters.`);
  if (!SECRET_VALUE.test(value))
    throw fail(400, 'invalid_characters', 'value may hold only letters, digits, underscores, hyphens and dots.');
  return value;
}

function createSecret({ world, body }: RouteContext): RouteResult {
  const o = bodyObject(body);
  const key = secretKey(o);
  const value = secretValue(o);
  if (world.secrets.has(key)) throw fail(400, 'existing_key', `${key} already exists; update it instead.`);
  world.secrets.set(key, value);
  return { body: { success: true, msg: 'Environment variable added successfully' } };
}

function updateSecret({ world, body }: RouteContext): RouteResult {
  const o = bodyObject(body);
  const key = secretKey(o);
  const value = secretValue(o);
  if (!world.secrets.has(key)) throw fail(400, 'nonexistent_key', `${key} does not exist.`);
  world.secrets.set(key, value);
  return { body: { success: true, msg: 'Environment variable updated successfully' } };
}

function deleteSecret({ world, body }: RouteContext): RouteResult {
  const key = secretKey(bodyObject(body));
  if (!world.secrets.delete(key)) throw fail(400, 'nonexistent_key', `${key} does not exist.`);
  return { body: { success: true, msg: 'Environment variable deleted successfully' } };
}

/** create_ssh_key.yaml: NUL characters are removed; an absent key is `no_ssh_key`. */
export function sshKeyOf(body: unknown): string {
  const raw = bodyObject(body, true).ssh_key;
  const key = typeof raw === 'string' ? raw.replaceAll('\u0000', '').trim() : '';
  if (key === '') throw fail(400, 'no_ssh_key', 'No ssh key provided');
  if (key.length > 16_384 || !/^(ssh-|ecdsa-|sk-)\S+ \S+/.test(key))
    throw invalidArgs('ssh_key must be an OpenSSH public key (ssh-ed25519 AAAA..., ssh-rsa AAAA...).');
  return key;
}

function parsePermissions(v: unknown): Permissions | null {
  if (v === undefined || v === null) return null;
  const api = (v as Json | null)?.api;
  const invalid = (msg: string) => fail(400, 'invalid_permissions', msg);
  if (typeof v !== 'object' || typeof api !== 'object' || api === null || Array.isArray(api)) {
    throw invalid('permissions must look like {"api": {"<category>": {}, ...}}.');
  }
  for (const [c, constraint] of Object.entries(api as Json)) {
    if (typeof constraint !== 'object' || constraint === null || Array.isArray(constraint))
      throw invalid(`permissions.api.${c} must be an object.`);
  }
  return { api: api as Permissions['api'] };
}

function createKey({ world, body, principal }: RouteContext): RouteResult {
  const o = bodyObject(body, true);
  const name = str(o, 'name', { max: 255 }) ?? '';
  const permissions = parsePermissions(o.permissions);
  const own = principal?.kind === 'user' ? principal.permissions : null;
  if (!mayGrant(own, permissions)) {
    const missing = permissions ? Object.keys(permissions.api).find((c) => !own || !Object.hasOwn(own.api, c)) : undefined;
    throw permissionDenied(missing ?? 'full_access', 'a key cannot grant more than it holds');
  }
  const rec = world.keys.create(name, permissions);
  // create_api_key.yaml: `{id, key, permissions}` (false when the key has no restriction).
  return { body: { success: true, id: rec.id, key: rec.key, name: rec.name, permissions: rec.permissions ?? false } };
}

function listKeys({ world }: RouteContext): RouteResult {
  const apikeys = world.keys.list().map((k) => ({
    ...k,
    user_id: world.config.account.user_id,
    rights: k.permissions === null ? 'full' : 'scoped',
    team_id: null,
    team_name: null,
  }));
  return { body: { success: true, apikeys } };
}

export const accountRoutes: Route[] = [
  { method: 'GET', path: '/api/v0/users/current', auth: 'key', category: 'user_read', group: 'user', handler: currentUser },

  {
    method: 'GET',
    path: '/api/v0/secrets',
    auth: 'key',
    category: 'user_read',
    group: 'secrets',
    limited: 'detail',
    handler: ({ world }) => ({ body: { success: true, secrets: world.secrets.masked() } }),
  },
  {
    method: 'POST',
    path: '/api/v0/secrets',
    auth: 'key',
    category: 'user_write',
    group: 'secrets_write',
    limited: 'detail',
    handler: createSecret,
  },
  {
    method: 'PUT',
    path: '/api/v0/secrets',
    auth: 'key',
    category: 'user_write',
    group: 'secrets_write',
    limited: 'detail',
    handler: updateSecret,
  },
  {
    method: 'DELETE',
    path: '/api/v0/secrets',
    auth: 'key',
    category: 'user_write',
    group: 'secrets_write',
    limited: 'detail',
    handler: deleteSecret,
  },

  {
    // show_ssh_keys.yaml: a bare array, the key in `key`.
    method: 'GET',
    path: '/api/v0/ssh',
    auth: 'key',
    category: 'user_read',
    group: 'ssh_keys',
    handler: ({ world }) => ({ body: world.sshKeys.list().map(({ public_key, ...k }) => ({ ...k, key: public_key })) }),
  },
  {
    method: 'POST',
    path: '/api/v0/ssh',
    auth: 'key',
    category: 'user_write',
    group: 'ssh_keys',
    limited: 'detail',
    handler: ({ world, body }) => ({ body: { success: true, key: world.sshKeys.add(sshKeyOf(body)) } }),
  },
  {
    method: 'PUT',
    path: '/api/v0/ssh/{id}',
    auth: 'key',
    category: 'user_write',
    group: 'ssh_keys',
    limited: 'detail',
    handler: ({ world, params, body }) => {
      const id = idParam(params, 'id');
      const key = world.sshKeys.update(id, sshKeyOf(body));
      if (!key) throw fail(400, 'no_ssh_key', `No SSH key ${id}.`);
      return { body: { success: true, key } };
    },
  },
  {
    method: 'DELETE',
    path: '/api/v0/ssh/{id}',
    auth: 'key',
    category: 'user_write',
    group: 'ssh_keys',
    handler: ({ world, params }) => {
      // delete_ssh_key.yaml answers an unknown key with 400 no_ssh_key.
      if (!world.sshKeys.delete(idParam(params, 'id'))) throw fail(400, 'no_ssh_key', 'No ssh key provided');
      return { body: { success: true } };
    },
  },

  {
    method: 'GET',
    path: '/api/v0/auth/apikeys',
    auth: 'key',
    category: 'user_read',
    group: 'api_keys',
    limited: 'detail',
    handler: listKeys,
  },
  {
    method: 'POST',
    path: '/api/v0/auth/apikeys',
    auth: 'key',
    category: 'user_write',
    group: 'api_keys_write',
    limited: 'detail',
    handler: createKey,
  },
  {
    method: 'DELETE',
    path: '/api/v0/auth/apikeys/{id}',
    auth: 'key',
    category: 'user_write',
    group: 'api_keys_write',
    limited: 'detail',
    handler: ({ world, params }) => {
      // delete_api_key.yaml: 200 is the JSON string, 404 `{msg}` alone.
      if (!world.keys.delete(idParam(params, 'id'))) return { status: 404, body: { msg: 'API Key not found.' } };
      return { body: 'Successfully Deleted API Key' };
    },
  },
  {
    // Not in the docs: this simulator's reset. A new value, shown once; the old one dies now.
    method: 'POST',
    path: '/api/v0/auth/apikeys/{id}/reset',
    auth: 'key',
    category: 'user_write',
    group: 'api_keys_write',
    handler: ({ world, params }) => {
      const id = idParam(params, 'id');
      const rec = world.keys.reset(id);
      if (!rec) return { status: 404, body: { msg: 'API Key not found.' } };
      return { body: { success: true, id: rec.id, key: rec.key } };
    },
  },
];
