// Both backends' schemas, rendered from the one table list (src/store/schema.ts), are the schemas
// the two hand-written migration lists made before it (issue #33 item 7), at every version: a new
// database ends where it did, and one at any earlier version takes the same steps. The expected
// history (./schema-history.json) was read from databases the hand-written lists migrated: per
// version, the lines of the schema's description that the step added and removed.
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../../src/store/migrations.js';
import { PG_MIGRATIONS } from '../../../src/store/pg/migrations.js';
import { createPgDatabase, type PgDatabase } from '../../helpers/pg-database.js';

interface Step {
  version: number;
  added: string[];
  removed: string[];
}
const expected = JSON.parse(readFileSync(new URL('./schema-history.json', import.meta.url), 'utf8')) as { sqlite: Step[]; pg: Step[] };

/** Each version's change to the schema's description, as lines added and removed. */
async function historyOf(steps: string[], apply: (sql: string) => Promise<void> | void, describe: () => Promise<string[]> | string[]) {
  const history: Step[] = [];
  let before: string[] = [];
  for (const [i, sql] of steps.entries()) {
    await apply(sql);
    const after = await describe();
    history.push({ version: i + 1, added: after.filter((l) => !before.includes(l)), removed: before.filter((l) => !after.includes(l)) });
    before = after;
  }
  return history;
}

/** A SQLite schema as lines: every column in order, key, index and AUTOINCREMENT, and the meta rows. */
function describeSqlite(db: Database.Database): string[] {
  const lines: string[] = [];
  const tables = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name`).all() as Array<{
    name: string;
    sql: string;
  }>;
  for (const t of tables) {
    for (const c of db.pragma(`table_xinfo(${t.name})`) as Array<{
      cid: number;
      name: string;
      type: string;
      notnull: number;
      dflt_value: string | null;
      pk: number;
    }>) {
      lines.push(
        `${t.name}.${c.cid} ${c.name} ${c.type}${c.notnull ? ' NOT NULL' : ''}${c.dflt_value === null ? '' : ` DEFAULT ${c.dflt_value}`}${c.pk ? ` PK${c.pk}` : ''}`,
      );
    }
    if (/AUTOINCREMENT/i.test(t.sql)) lines.push(`${t.name} AUTOINCREMENT`);
    for (const f of db.pragma(`foreign_key_list(${t.name})`) as Array<{ table: string; from: string; to: string }>) {
      lines.push(`${t.name} FOREIGN KEY (${f.from}) REFERENCES ${f.table}(${f.to})`);
    }
    for (const ix of db.pragma(`index_list(${t.name})`) as Array<{ name: string; unique: number; origin: string; partial: number }>) {
      const cols = (db.pragma(`index_info(${ix.name})`) as Array<{ name: string }>).map((c) => c.name).join(', ');
      const sql = (db.prepare(`SELECT sql FROM sqlite_master WHERE name = ?`).get(ix.name) as { sql: string | null }).sql;
      lines.push(
        `${t.name} index ${ix.name} (${cols}) unique=${ix.unique} origin=${ix.origin} partial=${ix.partial}${sql ? `: ${sql.replace(/\s+/g, ' ')}` : ''}`,
      );
    }
  }
  for (const m of db.prepare(`SELECT key, value FROM meta ORDER BY key`).all() as Array<{ key: string; value: string }>)
    lines.push(`meta ${m.key}=${m.value}`);
  return lines.sort();
}

/** A Postgres schema as lines: every column in order with its collation, constraint and index, and the meta rows. */
async function describePg(c: pg.Client): Promise<string[]> {
  const lines: string[] = [];
  const columns = await c.query(
    `SELECT table_name, ordinal_position, column_name, data_type, collation_name, is_nullable, column_default, is_identity, identity_generation
     FROM information_schema.columns WHERE table_schema = current_schema()`,
  );
  for (const r of columns.rows) {
    lines.push(
      `${r.table_name}.${String(r.ordinal_position).padStart(2, '0')} ${r.column_name} ${r.data_type}${r.collation_name ? ` COLLATE ${r.collation_name}` : ''}` +
        `${r.is_nullable === 'NO' ? ' NOT NULL' : ''}${r.column_default === null ? '' : ` DEFAULT ${r.column_default}`}` +
        `${r.is_identity === 'YES' ? ` IDENTITY ${r.identity_generation}` : ''}`,
    );
  }
  const constraints = await c.query(
    `SELECT t.relname AS table, k.conname AS name, pg_get_constraintdef(k.oid) AS def
     FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid WHERE t.relnamespace = current_schema()::regnamespace`,
  );
  for (const r of constraints.rows) lines.push(`${r.table} constraint ${r.name}: ${r.def}`);
  const indexes = await c.query(`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()`);
  for (const r of indexes.rows) lines.push(`${r.tablename} index ${r.indexname}: ${r.indexdef}`);
  const tables = await c.query(`SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'meta'`);
  if (tables.rowCount) {
    for (const m of (await c.query(`SELECT key, value FROM meta ORDER BY key`)).rows) lines.push(`meta ${m.key}=${m.value}`);
  }
  return lines.sort();
}

describe('the schema of either backend', () => {
  it('is, version by version, the SQLite schema the hand-written migrations made', async () => {
    const db = new Database(':memory:');
    try {
      const history = await historyOf(
        MIGRATIONS,
        (sql) => void db.exec(sql),
        () => describeSqlite(db),
      );
      expect(history).toEqual(expected.sqlite);
    } finally {
      db.close();
    }
  });

  describe('on Postgres', () => {
    let database: PgDatabase;
    let client: pg.Client;
    beforeEach(async () => {
      database = await createPgDatabase();
      client = new pg.Client({ connectionString: database.url });
      await client.connect();
    });
    afterEach(async () => {
      await client.end();
      await database.drop();
    });

    it('is, version by version, the Postgres schema the hand-written migrations made', async () => {
      const history = await historyOf(
        PG_MIGRATIONS,
        async (sql) => void (await client.query(sql)),
        () => describePg(client),
      );
      expect(history).toEqual(expected.pg);
    });
  });
});
