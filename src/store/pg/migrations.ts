// The Postgres store's migrations, from the same schema as SQLite's (../schema.ts), numbered in a
// history of their own: Postgres came when the schema was at version 7, so its version 1 is the
// schema's versions 1-7 at once, and its version n after that is the schema's version n + 6. The
// versions applied are rows of schema_migrations, and all pending ones run in one transaction
// under an advisory lock (./open.ts), so two daemons starting together migrate once.
import { HISTORY } from '../schema.js';
import { migrationSql } from '../schema-sql.js';

/** The last schema version that Postgres's first migration holds. */
const FIRST_HOLDS_UP_TO = 7;

export const PG_MIGRATIONS: string[] = [
  migrationSql('postgres', 1, FIRST_HOLDS_UP_TO),
  ...HISTORY.slice(FIRST_HOLDS_UP_TO).map((_, i) => migrationSql('postgres', FIRST_HOLDS_UP_TO + i + 1, FIRST_HOLDS_UP_TO + i + 1)),
];
