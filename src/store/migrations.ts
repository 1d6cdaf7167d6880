// The SQLite store's migrations: one per version of the schema (./schema.ts), moving the database
// from user_version i to i+1. All pending ones run in one immediate transaction at open
// (./database.ts), so a crash mid-migration leaves the old version intact.
import { HISTORY } from './schema.js';
import { migrationSql } from './schema-sql.js';

export const MIGRATIONS: string[] = HISTORY.map((_, i) => migrationSql('sqlite', i + 1, i + 1));
