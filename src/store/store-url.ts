// Where the store lives, from `store.url`: absent or a path is a SQLite file (berth.db in
// BERTH_HOME by default); `postgres://` or `postgresql://` is a Postgres database. The password a
// URL carries is never shown: `describePgUrl` names the server and database only, for every
// message and log line that has to say which store.

import { resolve } from 'node:path';

export type StoreLocation = { kind: 'sqlite'; file: string | undefined } | { kind: 'postgres'; url: string };

export function isPgUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** What `store.url` names: a SQLite file (BERTH_HOME's berth.db when absent) or a Postgres database. */
export function storeLocation(url: string | null | undefined): StoreLocation {
  if (!url) return { kind: 'sqlite', file: undefined };
  return isPgUrl(url) ? { kind: 'postgres', url } : { kind: 'sqlite', file: resolve(url) };
}

/** `host:port/database` (and the user): what a message may say of a Postgres URL. */
export function describePgUrl(url: string): string {
  try {
    const u = new URL(url);
    const db = decodeURIComponent(u.pathname.replace(/^\//, '')) || '(default database)';
    const user = u.username ? ` as ${decodeURIComponent(u.username)}` : '';
    return `postgres ${u.hostname || 'localhost'}:${u.port || '5432'}/${db}${user}`;
  } catch {
    return 'postgres (an unreadable URL)';
  }
}

/** Why a Postgres URL cannot be used, or null when it can. */
export function pgUrlProblem(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'is not a valid postgres:// URL';
  }
  if (!u.hostname) return 'names no server (postgres://USER:PASSWORD@HOST:PORT/DATABASE)';
  if (!u.pathname.replace(/^\//, '')) return 'names no database (postgres://USER:PASSWORD@HOST:PORT/DATABASE)';
  return null;
}
