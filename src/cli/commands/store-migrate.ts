// `berth store migrate [--to URL] [--from FILE]`: copies the SQLite store into an empty Postgres
// database (src/store/migrate-to-pg.ts) and says what to do next. Refusals (a daemon on the store,
// a database that is not empty, a wrong URL or password) are StoreErrors: one sentence, exit 2.
import { berthHome, storeUrlFromEnv } from '../../config/home.js';
import { ConfigError } from '../../errors.js';
import { migrateToPg } from '../../store/migrate-to-pg.js';
import { isPgUrl } from '../../store/store-url.js';
import { EXIT } from '../exit-codes.js';
import type { Io } from '../io.js';

export function storeMigrateCommand(opts: { to?: string; from?: string }, io: Io, env: NodeJS.ProcessEnv): number {
  const url = opts.to ?? storeUrlFromEnv(env);
  if (!url || !isPgUrl(url)) {
    throw new ConfigError(
      'berth store migrate needs --to postgres://USER:PASSWORD@HOST:PORT/DATABASE (or BERTH_STORE_URL set to one).',
      'store.url',
    );
  }
  const result = migrateToPg({ home: berthHome(env), file: opts.from, url });
  const { rows } = result;
  io.out(
    `Copied store ${result.storeId} into the ${result.where} database: ${rows.runs} runs, ${rows.attempts} attempts, ${rows.events} events, ${rows.outbox} notifications, ${rows.instance_keys} instance keys, ${rows.webhook_events} webhook events.`,
  );
  io.out(
    'Start the daemon with store.url (or BERTH_STORE_URL) set to that database; the SQLite file is kept as a backup, and no daemon starts on it any more.',
  );
  return EXIT.ok;
}
