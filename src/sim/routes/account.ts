// The account: user record, secrets, SSH keys and API keys.
import { mayGrant } from '../auth.js';
import type { Permissions } from '../config.js';
import type { Route, RouteContext, RouteResult } from '../router.js';
import { invalidArgs, notFound, permissionDenied } from '../sim-error.js';
import { bodyObject, idParam, str, type Json } from '../validate.js';

function currentUser({ world }: RouteContext): RouteResult {
  const { account } = world.config;
  const credit = Math.round(world.credit() * 100) / 100;
  return {
    body: {
      id: account.user_id,
      username: account.email.split('@')[0],
      email: account.email,
      fullname: 'Simulated User',
      credit,
      balance: credit,
      ssh_key: world.sshKeys.latest(),
      can_pay: true,
      has_billing: true,
      email_verified: true,
    },
  };
}

const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function setSecret({ world, body }: RouteContext): RouteResult {
  const o = bodyObject(body);
  const key = str(o, 'key', { required: true, max: 256 });
  if (!SECRET_NAME.test(key)) throw invalidArgs('key must be an environment variable name (letters, digits, underscore).');
  const value = o.value;
  if (typeof value !== 'string') throw invalidArgs('value must be a string.');
  world.secrets.set(key, value);
  return { body: { success: true } };
}

function deleteSecret({ world, body }: RouteContext): RouteResult {
  const key = str(bodyObject(body), 'key', { required: true });
  if (!world.secrets.delete(key)) throw notFound(`No secret named ${key}.`);
  return { body: { success: true } };
}

function addSshKey({ world, body }: RouteContext): RouteResult {
  const key = str(bodyObject(body), 'ssh_key', { required: true, max: 16_384 }).trim();
  if (!/^(ssh-|ecdsa-|sk-)/.test(key)) throw invalidArgs('ssh_key must be an OpenSSH public key (ssh-ed25519 ..., ssh-rsa ...).');
  return { body: { success: true, key: world.sshKeys.add(key) } };
}

function parsePermissions(v: unknown): Permissions | null {
  if (v === undefined || v === null) return null;
  const api = (v as Json | null)?.api;
  if (typeof v !== 'object' || typeof api !== 'object' || api === null || Array.isArray(api)) {
    throw invalidArgs('permissions must look like {"api": {"<category>": {}, ...}}.');
  }
  for (const [c, constraint] of Object.entries(api as Json)) {
    if (typeof constraint !== 'object' || constraint === null || Array.isArray(constraint)) {
      throw invalidArgs(`permissions.api.${c} must be an object.`);
    }
  }
  return { api: api as Permissions['api'] };
}

function createKey({ world, body, principal }: RouteContext): RouteResult {
  const o = bodyObject(body, true);
  const name = str(o, 'name', { max: 256 }) ?? '';
  const permissions = parsePermissions(o.permissions);
  const own = principal?.kind === 'user' ? principal.permissions : null;
  if (!mayGrant(own, permissions)) {
    const missing = permissions ? Object.keys(permissions.api).find((c) => !own || !Object.hasOwn(own.api, c)) : undefined;
    throw permissionDenied(missing ?? 'full_access', 'a key cannot grant more than it holds');
  }
  const rec = world.keys.create(name, permissions);
  return { body: { success: true, id: rec.id, key: rec.key, name: rec.name, permissions: rec.permissions } };
}

export const accountRoutes: Route[] = [
  { method: 'GET', path: '/api/v0/users/current', auth: 'key', category: 'user_read', handler: currentUser },

  {
    method: 'GET',
    path: '/api/v0/secrets',
    auth: 'key',
    category: 'user_read',
    group: 'secrets',
    handler: ({ world }) => ({ body: { success: true, secrets: world.secrets.masked() } }),
  },
  { method: 'POST', path: '/api/v0/secrets', auth: 'key', category: 'user_write', group: 'secrets', handler: setSecret },
  { method: 'DELETE', path: '/api/v0/secrets', auth: 'key', category: 'user_write', group: 'secrets', handler: deleteSecret },

  {
    method: 'GET',
    path: '/api/v0/ssh',
    auth: 'key',
    category: 'user_read',
    handler: ({ world }) => ({ body: { success: true, ssh_keys: world.sshKeys.list() } }),
  },
  { method: 'POST', path: '/api/v0/ssh', auth: 'key', category: 'user_write', handler: addSshKey },
  {
    method: 'DELETE',
    path: '/api/v0/ssh/{id}',
    auth: 'key',
    category: 'user_write',
    handler: ({ world, params }) => {
      const id = idParam(params, 'id');
      if (!world.sshKeys.delete(id)) throw notFound(`No SSH key ${id}.`);
      return { body: { success: true } };
    },
  },

  {
    method: 'GET',
    path: '/api/v0/auth/apikeys',
    auth: 'key',
    category: 'user_read',
    handler: ({ world }) => ({ body: { success: true, apikeys: world.keys.list() } }),
  },
  { method: 'POST', path: '/api/v0/auth/apikeys', auth: 'key', category: 'user_write', handler: createKey },
  {
    method: 'DELETE',
    path: '/api/v0/auth/apikeys/{id}',
    auth: 'key',
    category: 'user_write',
    handler: ({ world, params }) => {
      const id = idParam(params, 'id');
      if (!world.keys.delete(id)) throw notFound(`No API key ${id}.`);
      return { body: { success: true } };
    },
  },
  {
    // Not shown by the seed: this simulator's reset. A new value, shown once; the old one dies now.
    method: 'POST',
    path: '/api/v0/auth/apikeys/{id}/reset',
    auth: 'key',
    category: 'user_write',
    handler: ({ world, params }) => {
      const id = idParam(params, 'id');
      const rec = world.keys.reset(id);
      if (!rec) throw notFound(`No API key ${id}.`);
      return { body: { success: true, id: rec.id, key: rec.key } };
    },
  },
];
