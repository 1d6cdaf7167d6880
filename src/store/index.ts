// The store: berth.db opened, migrated and locked, with one repository per table.
import { randomBytes } from 'node:crypto';
import { LeaseLostError, StoreError, StoreWriteError } from '../errors.js';
import { join } from 'node:path';
import { openDatabase, type OpenedDatabase, type OpenOptions } from './database.js';
import { acquireLock, type StoreLock } from './lock.js';
import { prepareHome } from './home.js';
import { openPgDatabase, type PgOpenOptions } from './pg/open.js';
import { PgCallError } from './pg/bridge.js';
import { createAttemptsRepo } from './attempts.js';
import { createEventsRepo } from './events.js';
import { createOutboxRepo } from './outbox.js';
import { createRunsRepo } from './runs.js';
import { createWebhookEventsRepo } from './webhook-events.js';
import { createInstanceKeysRepo } from './instance-keys.js';
import { createOutputsRepo } from './outputs.js';
import { createWarmHoldsRepo } from './warm-holds.js';
import { createLeasesRepo, type Lease } from './leases.js';
import { createRateSlotsRepo } from './rate-slots.js';
import { createSightingsRepo } from './sightings.js';
import { createBlobsRepo } from './blobs.js';

/**
 * A database's failure of a write becomes a StoreWriteError (retryable); anything else is rethrown.
 * Postgres's transient failures are StoreWriteErrors already (./pg/pg-db.ts); its others are
 * treated as SQLite's are.
 */
function asWriteError(err: unknown): unknown {
  if (err instanceof PgCallError) return new StoreWriteError(err.code, err);
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? new StoreWriteError(code, err) : err;
}

/** The daemon-wide money caps (budget.*) recorded in a shared store; null is no cap. */
export interface SharedCaps {
  max_usd_per_hour: number | null;
  max_usd_per_day: number | null;
  /** The daemon that recorded them, and when (ms). */
  by: string;
  at: number;
}

/** The service (its base URL) and the account (users/current's `id`, null until it answered) a store rents on. */
export interface ServiceBinding {
  base_url: string;
  account_id: number | null;
  /** When it was recorded, ms. */
  at: number;
}

/** The advisory lock of the money caps' check (any constant; "berthc" in ASCII). */
const CAPS_LOCK = 0x626572746863;

/** A SQLite store (BERTH_HOME's berth.db, or `file`), or with `pg` a Postgres one. */
export type StoreOptions = OpenOptions & { pg?: PgOpenOptions | undefined };

export function openStore(options: StoreOptions) {
  if (options.pg && options.replaceStore) {
    throw new StoreError(
      '--replace-store is for a SQLite store (its berth.db and store.json); a Postgres store keeps its id in its database.',
    );
  }
  // The daemon's open of a Postgres store: BERTH_HOME still holds the control token and daemon.json,
  // and its lock keeps this home to one daemon. Several daemons, each with its own home, may share
  // the database (src/daemon/cluster/).
  let homeLock: StoreLock | undefined;
  if (options.pg && options.lock) {
    prepareHome(options.home);
    homeLock = acquireLock(join(options.home, 'daemon.lock'));
  }
  let opened: OpenedDatabase;
  try {
    opened = options.pg ? openPgDatabase({ ...options.pg, ...(options.lock ? { markHome: options.home } : {}) }) : openDatabase(options);
  } catch (err) {
    homeLock?.release();
    throw err;
  }
  const { db } = opened;
  const repos = {
    runs: createRunsRepo(db),
    attempts: createAttemptsRepo(db),
    events: createEventsRepo(db),
    webhookEvents: createWebhookEventsRepo(db),
    instanceKeys: createInstanceKeysRepo(db),
    outputs: createOutputsRepo(db),
    outbox: createOutboxRepo(db),
    leases: createLeasesRepo(db),
    rateSlots: createRateSlotsRepo(db),
    sightings: createSightingsRepo(db),
    blobs: createBlobsRepo(db),
    warm: createWarmHoldsRepo(db),
  };
  const purgedSpend = db.prepare(`SELECT CAST(value AS DOUBLE PRECISION) AS usd FROM meta WHERE key = 'purged_spend_usd'`);
  const runStates = db.prepare(`SELECT state, count(*) AS n FROM runs GROUP BY state`);
  const commitListeners = new Set<() => void>();
  const probe = db.prepare(
    `INSERT INTO meta (key, value) VALUES ('write_probe', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
  );
  const keepKey = db.prepare(`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`);
  const keepMeta = db.prepare(`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`);
  const readKey = db.prepare(`SELECT value FROM meta WHERE key = ?`);
  const countRequest = db.prepare(
    `INSERT INTO meta (key, value) VALUES ('credit_read_requests', '1')
     ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(meta.value AS INTEGER) + 1 AS TEXT)`,
  );
  // Held until the transaction ends: daemons sharing a Postgres store check the money caps one at a time.
  const capsLock = db.dialect.name === 'postgres' ? db.prepare(`SELECT pg_advisory_xact_lock(${CAPS_LOCK})`) : undefined;
  /** See `transaction` below. */
  /** The generation `progress` advanced to in the transaction under way (a shared store). */
  let advanced = 0;
  /**
   * What to do should a write not commit after all (`ifRolledBack`): a list per level of the
   * transaction under way, the outermost first. Empty outside a transaction.
   */
  const undoLevels: Array<Array<(err: unknown) => void>> = [];
  function undo(hooks: Array<(err: unknown) => void>, err: unknown): void {
    for (const hook of hooks) hook(err);
  }
  function transaction<T>(fn: () => T): T {
    if (undoLevels.length > 0) return nested(fn);
    let generation = 0;
    let result: T;
    undoLevels.push([]);
    try {
      result = db.transaction(() => {
        advanced = 0;
        const value = fn();
        generation = Math.max(opened.bumpGeneration(), advanced);
        return value;
      });
    } catch (err) {
      const failed = asWriteError(err);
      undo(undoLevels.pop()!, failed);
      throw failed;
    }
    undoLevels.pop();
    opened.committed(generation);
    for (const listener of commitListeners) listener();
    return result;
  }
  /**
   * A transaction inside another (a savepoint): its writes commit with the outermost one, so the
   * generation, the commit listeners and its undo hooks wait for that.
   */
  function nested<T>(fn: () => T): T {
    undoLevels.push([]);
    let result: T;
    try {
      result = db.transaction(fn);
    } catch (err) {
      const failed = asWriteError(err);
      undo(undoLevels.pop()!, failed);
      throw failed;
    }
    const hooks = undoLevels.pop()!;
    undoLevels.at(-1)!.push(...hooks);
    return result;
  }
  return {
    storeId: opened.storeId,
    /** Which backend holds the store. */
    backend: db.dialect.name,
    /** Store ids whose labelled instances this store destroys (stores it replaced, see --replace-store). */
    formerStoreIds: opened.formerStoreIds,
    /** What this open found of a restored database, if anything (see ./identity.ts). */
    restore: opened.restore,
    replaced: opened.replaced,
    ...repos,
    /**
     * Runs fn in one immediate transaction (all or nothing) that counts as progress of the store:
     * it bumps the generation store.json mirrors once it has committed. A write SQLite refuses
     * throws StoreWriteError.
     */
    transaction,
    /**
     * A side effect's intent, fenced: runs fn in one transaction (as `transaction`) only if `lease`
     * still holds its run at `now`, so a daemon that lost the run (paused, cut off, its lease taken
     * over) writes no intent and so sends no call. Throws LeaseLostError, having written nothing.
     */
    fenced<T>(lease: Pick<Lease, 'run_id' | 'owner' | 'epoch'>, now: number, fn: () => T): T {
      return transaction(() => {
        if (!repos.leases.holds(lease, now)) throw new LeaseLostError(lease.run_id);
        return fn();
      });
    },
    /**
     * The money caps the daemons on this store keep (budget.*; several daemons on one store): as
     * the last daemon that started alone recorded them, or undefined before any did.
     */
    sharedCaps: {
      save(caps: SharedCaps): void {
        keepMeta.run('money_caps', JSON.stringify(caps));
      },
      load(): SharedCaps | undefined {
        const value = (readKey.get('money_caps') as { value: string } | undefined)?.value;
        return value === undefined ? undefined : (JSON.parse(value) as SharedCaps);
      },
    },
    /**
     * Inside a transaction that shows a shared store alive (a lease renewal): advances its
     * generation, mirrored in store.json once committed, by which a restored backup is found at
     * start (./pg/open.ts). Nothing on a SQLite store, whose every transaction counts.
     */
    progress(): void {
      if (opened.advance) advanced = opened.advance();
    },
    /**
     * The service and account this store's runs rent on (../daemon/service-binding.ts), as the last
     * start recorded them: undefined before any did.
     */
    binding: {
      save(binding: ServiceBinding): void {
        keepMeta.run('service_binding', JSON.stringify(binding));
      },
      load(): ServiceBinding | undefined {
        const value = (readKey.get('service_binding') as { value: string } | undefined)?.value;
        return value === undefined ? undefined : (JSON.parse(value) as ServiceBinding);
      },
    },
    /** The account's credit as the leading daemon last read it (several daemons on one store). */
    sharedCredit: {
      save(usd: number | null, at: number): void {
        keepMeta.run('account_credit', JSON.stringify({ usd, at }));
      },
      load(): number | null | undefined {
        const value = (readKey.get('account_credit') as { value: string } | undefined)?.value;
        return value === undefined ? undefined : (JSON.parse(value) as { usd: number | null }).usd;
      },
      /**
       * A daemon that does not lead asks the leader to read the credit now (a low_credit webhook): a
       * count, not a time, so that the machines' clocks do not matter.
       */
      requestRead(): void {
        countRequest.run();
      },
      /** How many reads were asked for so far (undefined: none ever). */
      readRequests(): number | undefined {
        const value = (readKey.get('credit_read_requests') as { value: string } | undefined)?.value;
        return value === undefined ? undefined : Number(value);
      },
    },
    /**
     * Inside a transaction: waits until no other daemon is checking the money caps, and keeps them
     * out until it commits (Postgres; one SQLite store has one daemon, whose write lock does it).
     */
    serializeCaps(): void {
      capsLock?.get();
    },
    /**
     * Inside a transaction: calls `hook` (with the error) should what it wrote so far not commit
     * after all: the transaction, or one around it (a group commit, ./group-commit.ts), failed
     * after it. Outside one, nothing: what was written has committed. A hook must not write.
     */
    ifRolledBack(hook: (err: unknown) => void): void {
      undoLevels.at(-1)?.push(hook);
    },
    /**
     * Calls `listener` after every transaction above has committed (the event stream reads what it
     * stored). It must not write to the store. Returns a function that removes it.
     */
    onCommit(listener: () => void): () => void {
      commitListeners.add(listener);
      return () => commitListeners.delete(listener);
    },
    /** Runs per state, all of them (ended ones until retention deletes them). */
    runsByState(): Array<{ state: string; n: number }> {
      return runStates.all() as Array<{ state: string; n: number }>;
    },
    /** Everything berth's instances have cost, USD, up to `now`: the attempts table plus what retention deleted. */
    spendUsd(now: number): number {
      return repos.attempts.spendUsd(now) + ((purgedSpend.get() as { usd: number } | undefined)?.usd ?? 0);
    },
    /**
     * Retention: deletes the runs that ended before `before` (with their attempts, events and
     * idempotency keys), every event older than it, and the notifications delivered or dead before
     * it, and the blobs no run names any more (a day after they were put). In batches, so no
     * transaction grows large.
     */
    purge(before: number, now: number): { runs: number; events: number; notifications: number } {
      let runs = 0;
      for (let n = -1; n !== 0; runs += n) n = db.transaction(() => repos.runs.purgeEnded(before, now));
      const events = db.transaction(() => repos.events.purgeBefore(before));
      const notifications = db.transaction(() => repos.outbox.purgeFinished(before));
      db.transaction(() => repos.blobs.purgeUnreferenced(now));
      return { runs, events, notifications };
    },
    /**
     * A random 32-byte key kept in berth.db under `name`, made on first use. It lives with the runs
     * it signs for, so it survives restarts (and comes back with a restored backup).
     */
    secretKey(name: string): Buffer {
      // Read first: once made, the key costs no write (a start while another program holds berth.db).
      const read = () => (readKey.get(`key:${name}`) as { value: string } | undefined)?.value;
      let value = read();
      if (value === undefined) {
        keepKey.run(`key:${name}`, randomBytes(32).toString('hex'));
        value = read()!;
      }
      return Buffer.from(value, 'hex');
    },
    /** True when the store takes a write again (after a StoreWriteError). */
    canWrite(): boolean {
      try {
        probe.run(String(Date.now()));
        return true;
      } catch {
        return false;
      }
    },
    /** One small write, or the StoreWriteError that says why the store takes none now. */
    probeWrite(): void {
      try {
        probe.run(String(Date.now()));
      } catch (err) {
        throw asWriteError(err);
      }
    },
    close: () => {
      opened.close();
      homeLock?.release();
    },
  };
}

export type Store = ReturnType<typeof openStore>;
export type { RunRow, RunState } from './runs.js';
export type { Lease } from './leases.js';
export type { AttemptRow } from './attempts.js';
export type { EventRow } from './events.js';
export type { OutputFile, OutputsRow } from './outputs.js';
export type { DeliveryOutcome, OutboxRow } from './outbox.js';
export { isEndState } from './runs.js';
