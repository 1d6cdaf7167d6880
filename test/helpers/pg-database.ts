// A database of its own on the run's Postgres server (./pg-server.ts), for one test file or one
// test: made empty, dropped at the end.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

/** The run's superuser URL with another database in it. */
function urlOf(database: string): string {
  const u = new URL(inject('pgAdminUrl'));
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
  drop(): Promise<void>;
}

/** Makes an empty database; `drop()` ends its connections and removes it. */
export async function createPgDatabase(): Promise<PgDatabase> {
  const name = `berth_test_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  return {
    url: urlOf(name),
    name,
    drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
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
