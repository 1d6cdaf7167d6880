// A database of its own on the run's Postgres server (./pg-server.ts), for one test file or one
// test: made empty, owned by a role of its own with a random password (a store's user is not a
// superuser), both dropped at the end.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

/** The run's server, with another user and database. */
function urlOf(database: string, user: string, password: string): string {
  const u = new URL(inject('pgAdminUrl'));
  u.username = user;
  u.password = password;
  u.pathname = `/${database}`;
  return u.href;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export interface PgDatabase {
  url: string;
  name: string;
  /** The password in `url` (a test checks that nothing shows it). */
  password: string;
  drop(): Promise<void>;
}

/** Makes an empty database and its owner; `drop()` ends their connections and removes both. */
export async function createPgDatabase(): Promise<PgDatabase> {
  const name = `berth_test_${randomBytes(6).toString('hex')}`;
  const password = `pw-${randomBytes(9).toString('base64url')}`;
  await admin(async (c) => {
    await c.query(`CREATE ROLE ${name} LOGIN PASSWORD '${password}'`);
    await c.query(`CREATE DATABASE ${name} OWNER ${name}`);
  });
  return {
    url: urlOf(name, name, password),
    name,
    password,
    drop: () =>
      admin(async (c) => {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await c.query(`DROP ROLE IF EXISTS ${name}`);
      }),
  };
}

/** Ends every connection to `database` but this one (a server restart, as its clients see it). */
export async function terminateConnections(database: string): Promise<number> {
  return admin(async (c) => {
    const r = await c.query(
      `SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
      [database],
    );
    return Number((r.rows[0] as { n: string }).n);
  });
}

/** Runs one query on `url` (a test's own look at what the store wrote). */
export async function queryPg<T = Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}
