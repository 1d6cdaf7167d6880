// The store's schema, written once for both backends: its history, one entry per version of the
// SQLite store (its user_version), each a list of changes. SQLite runs each version as a migration
// of its own (./migrations.ts); Postgres, which came after version 7, runs versions 1-7 as its
// first migration and each later one as its own (./pg/migrations.ts). ./schema-sql.ts writes a
// version's changes in either dialect. A version once released never changes: a database at any
// earlier version must arrive where a new one starts (test/unit/store/schema.test.ts).

/**
 * What a column holds, and so its type in each dialect (./schema-sql.ts). Postgres needs the
 * distinctions SQLite does not make: BIGINT for every ms timestamp and id (read back as numbers,
 * ./pg/worker.ts), DOUBLE PRECISION for money, COLLATE "C" for text compared or sorted as ids are
 * (runs are paged by id, in SQLite's byte order).
 */
export type ColumnType =
  | 'text'
  /** Text compared by bytes. */
  | 'key'
  | 'int'
  /** A ms timestamp or an id. */
  | 'bigint'
  | 'real'
  /** The table's own ever-growing id, its primary key. */
  | 'serial'
  /** Bytes (BLOB, BYTEA). */
  | 'bytes';
/** `name type constraints`: the type checked here, the constraints SQL that both dialects read alike. */
type ColumnDef = `${string} ${ColumnType}` | `${string} ${ColumnType} ${string}`;

export type Change =
  /** `constraint`: a table constraint after the columns (a primary key of two columns). */
  | { kind: 'table'; table: string; columns: ColumnDef[]; constraint?: string }
  | { kind: 'add'; table: string; columns: ColumnDef[] }
  | { kind: 'drop'; table: string; column: string }
  /** `only`: an index one backend has and the other never had. */
  | { kind: 'index'; def: string; only?: 'postgres' }
  /** A meta row a later version reads, written unless there. */
  | { kind: 'seed'; key: string; value: string }
  /** Rows a SQLite store wrote before a change, brought to it; a Postgres store has none (it starts at version 7). */
  | { kind: 'sqlite-backfill'; sql: string };

const table = (name: string, columns: ColumnDef[], constraint?: string): Change =>
  constraint === undefined ? { kind: 'table', table: name, columns } : { kind: 'table', table: name, columns, constraint };
const add = (name: string, columns: ColumnDef[]): Change => ({ kind: 'add', table: name, columns });
const index = (def: string): Change => ({ kind: 'index', def });
const seed = (key: string, value: string): Change => ({ kind: 'seed', key, value });

/** Version i + 1 of the schema is HISTORY[i]. */
export const HISTORY: Change[][] = [
  // Version 1.
  [
    table('meta', ['key key PRIMARY KEY', 'value text NOT NULL']),
    table('runs', [
      'id key PRIMARY KEY',
      'name text NOT NULL',
      'spec_json text NOT NULL', // the resolved job spec, env values included (needed to create)
      'state key NOT NULL', // queued searching creating booting running destroying failed cancelled
      'created_at bigint NOT NULL', // ms since epoch
      'updated_at bigint NOT NULL',
      'ended_at bigint',
      'idempotency_key key UNIQUE',
      'relax_level int NOT NULL DEFAULT 0',
      'attempt int NOT NULL DEFAULT 0',
      'error_json text',
      'snapshot_json text', // xstate persisted snapshot
      'machine_version int',
    ]),
    index('runs_live ON runs(state) WHERE ended_at IS NULL'),
    // The runs listed newest first, paged by (created_at, id). SQLite's store never had it; adding it
    // there would be a migration of its own.
    { kind: 'index', def: 'runs_created ON runs(created_at DESC, id)', only: 'postgres' },

    // One row per offer tried. It is also the journal of the create: the row is written with
    // create_state 'intent' before the create call, so a restarted daemon knows a call may have
    // reached the service and looks for the label before doing anything else.
    table(
      'attempts',
      [
        'run_id key NOT NULL REFERENCES runs(id)',
        'n int NOT NULL',
        'offer_id bigint NOT NULL',
        'machine_id bigint',
        'dph_total real',
        'label key NOT NULL UNIQUE',
        'create_state key NOT NULL', // intent created offer_gone failed
        'create_detail text',
        'instance_id bigint',
        'actual_status text',
        'status_msg text',
        'ssh_host text',
        'ssh_port int',
        'outcome text',
        'detail text',
        "destroy_state text NOT NULL DEFAULT 'none'", // none requested confirmed (dropped in version 3)
        'started_at bigint NOT NULL',
        'ended_at bigint',
      ],
      'PRIMARY KEY (run_id, n)',
    ),
    index('attempts_instance ON attempts(instance_id)'),

    table('events', [
      'id serial',
      'run_id key NOT NULL',
      'at bigint NOT NULL',
      'type key NOT NULL',
      'message text NOT NULL',
      'data_json text',
    ]),
    index('events_run ON events(run_id, id)'),
  ],

  // Version 2 (issue #14): restored stores, durable cancels, idempotency conflicts, bounded events.
  [
    add('runs', [
      // Set on the runs a restored database still showed live: they wait for `berth resume` or a cancel.
      'held_at bigint',
      // A cancel asked for through the API, kept so that it is carried out even if the run's actor was not running.
      'cancel_requested_at bigint',
      // sha256 of the submitted spec (canonical JSON), to tell a repeated submission from a key reused for another spec.
      'request_hash text',
    ]),
    index('runs_ended ON runs(ended_at) WHERE ended_at IS NOT NULL'),
    // Consecutive repeats of an event (a search retried through an outage) fold into one row.
    add('events', ['count int NOT NULL DEFAULT 1', 'first_at bigint', 'fold_key key']),
    index('events_at ON events(at)'),
    seed('generation', '0'),
  ],

  // Version 3 (issue #10): destroy_state was written and never read; what the money guard needs
  // per attempt instead. Rows written before get what the event log says (or the nearest bound).
  [
    { kind: 'drop', table: 'attempts', column: 'destroy_state' },
    add('attempts', [
      'instance_created_at bigint', // when the create that made the instance was sent: it cannot have billed before
      'first_running_at bigint', // when a list first showed the instance running
      'destroy_confirmed_at bigint', // when a list taken after the destroy no longer showed the instance; NULL while it may still bill
    ]),
    {
      kind: 'sqlite-backfill',
      sql: `
  UPDATE attempts SET instance_created_at = started_at WHERE instance_id IS NOT NULL;
  UPDATE attempts SET first_running_at = (
    SELECT min(e.at) FROM events e
    WHERE e.run_id = attempts.run_id AND e.type = 'attempt.running' AND json_extract(e.data_json, '$.n') = attempts.n
  ) WHERE instance_id IS NOT NULL;
  -- An attempt that held an instance ends only once its destroy is confirmed.
  UPDATE attempts SET destroy_confirmed_at = COALESCE((
    SELECT min(e.at) FROM events e
    WHERE e.run_id = attempts.run_id AND e.type = 'destroy.confirmed' AND json_extract(e.data_json, '$.n') = attempts.n
  ), ended_at) WHERE instance_id IS NOT NULL AND ended_at IS NOT NULL;`,
    },
  ],

  // Version 4 (issue #11, the money guard): what a price change leaves behind, and the webhook
  // deliveries already acted on.
  [
    // $ the attempt's instance accrued before its current price applied (a bid raised, or the list
    // showing another dph_total), and since when the current dph_total applies (NULL: from the start).
    add('attempts', ['usd_before real NOT NULL DEFAULT 0', 'dph_since bigint']),
    // The instances that may bill now (and creates in flight): the $/h cap and every run's price.
    index(`attempts_billing ON attempts(run_id) WHERE destroy_confirmed_at IS NULL AND create_state IN ('intent', 'created')`),
    // Instances that stopped billing lately: the spend of the last 24 h.
    index('attempts_confirmed ON attempts(destroy_confirmed_at) WHERE destroy_confirmed_at IS NOT NULL'),

    // Signed webhook deliveries acted on, by the event id inside the signed body: a replay within the
    // timestamp tolerance is refused, also after a restart. Rows older than the tolerance are deleted.
    table('webhook_events', ['event_id key PRIMARY KEY', 'received_at bigint NOT NULL', 'notif_type text NOT NULL']),
    index('webhook_events_at ON webhook_events(received_at)'),
  ],

  // Version 5 (issue #12): how an attempt became ready and where SSH answered, and its container's
  // last log lines when it failed.
  [
    add('attempts', [
      'ready_at bigint', // when the run took the instance as ready, and how: 'ssh' (a banner), 'status' or 'callback'
      'ready_via text',
      // JSON [{kind: 'proxy'|'direct', host, port}]: the endpoints that answered with a banner (via
      // 'ssh'), else the ones the list showed.
      'ssh_endpoints text',
      'log_tail text', // the last lines of the container's log (at most 4 KB, secrets removed), fetched when it failed
    ]),
  ],

  // Version 6 (issue #13): the notification outbox. A row is written in the transaction that stores
  // its event, so a killed daemon loses none; it is POSTed until delivered or dead.
  [
    table('outbox', [
      'seq serial',
      'id text NOT NULL', // the notification's id: the same for every target; receivers dedupe by it
      'type text NOT NULL', // run.running attempt.failed instance.lost run.failed run.cancelled run.expired budget.warning
      'run_id key NOT NULL',
      'log_id bigint', // the event-log row it tells of
      'target int NOT NULL', // its place in the config's notify list when it was made
      'target_url key NOT NULL', // where it goes (the path of a webhook URL is often a secret: never shown)
      'body text NOT NULL', // exactly what is POSTed
      "state key NOT NULL DEFAULT 'pending'", // pending delivered dead
      'attempts int NOT NULL DEFAULT 0',
      'created_at bigint NOT NULL',
      'next_at bigint', // pending: when it may be POSTed (again)
      'finished_at bigint', // delivered or dead: when (retention counts from it)
      'last_error text',
    ]),
    index(`outbox_due ON outbox(target_url, next_at) WHERE state = 'pending'`),
    index(`outbox_finished ON outbox(finished_at) WHERE state <> 'pending'`),
    // What runs deleted by retention had spent, so that the spend counter of /metrics never goes down.
    seed('purged_spend_usd', '0'),
  ],

  // Version 7 (issue #18): the per-instance keys (CONTAINER_API_KEY) a create answered with, so that
  // a restarted daemon still scrubs them from the container logs it keeps. A table of its own, so
  // that no attempt row (read whole into the run view) ever carries one; deleted once the
  // instance's destroy is confirmed.
  [table('instance_keys', ['instance_id bigint PRIMARY KEY', 'key text NOT NULL'])],

  // Version 8 (issue #21 item 2): a lease per live run, held by the daemon that acts for it (./leases.ts).
  [
    table('run_leases', [
      'run_id key PRIMARY KEY',
      'owner key NOT NULL', // the daemon's id
      'epoch bigint NOT NULL', // grows each time the run changes hands: fences an old owner's writes
      'expires_at bigint NOT NULL', // ms since epoch; past it, any daemon may take the run
    ]),
    index('run_leases_expiry ON run_leases(expires_at)'),
  ],

  // Version 9 (issue #22): the GPU the attempt's offer rents, as the search listed it, so that the
  // run shows the model rented rather than the one asked for. NULL for attempts journaled before.
  [
    add('attempts', [
      'gpu_name text', // the offer's gpu_name, e.g. 'RTX 4090'
      'num_gpus int', // how many of them the offer rents
    ]),
  ],

  // Version 10 (issue #21 item 4): the next free moment of each rate group, shared by the daemons of
  // one store (./rate-slots.ts).
  [
    table('rate_slots', [
      'grp key PRIMARY KEY', // a rate group: search, create, list, ...
      'next_at bigint NOT NULL', // ms since epoch (the database's clock): the earliest the group's next call may go
    ]),
  ],

  // Version 11 (issue #21 item 4): the account's instances as the leading daemon's lists showed them,
  // read by the other daemons of the store instead of listing the account themselves (./sightings.ts).
  [
    table('instance_sightings', [
      'instance_id bigint PRIMARY KEY',
      'instance_json text NOT NULL', // the fields berth reads of the instance's record
      'listed_at bigint NOT NULL', // ms (the database's clock): when the list that showed it was asked for
      'swept_at bigint', // ms: the start of the latest sweep of the whole account that showed it
      'written_at bigint NOT NULL', // ms: when it was written (readers' mark)
    ]),
    index('instance_sightings_written ON instance_sightings(written_at)'),
  ],

  // Version 12 (issue #39): how far the daemon has read a running task's output over SSH, so that a
  // restarted daemon reads on from the same byte (written with the kept tail, log_tail, in one
  // statement: what is kept and where the next read starts never disagree), and the host key of
  // the attempt's instance, pinned at berth's first login to it.
  [
    add('attempts', [
      'follow_offset bigint', // the byte after the last one of the task's out-file kept; NULL: never followed
      'ssh_host_key text', // SHA256:... of the instance's host key at the first login; NULL: never logged in
    ]),
  ],

  // Version 13 (issue #40): the outputs a task left, per attempt: written (state `collecting`) before
  // the transfer starts, so a daemon killed during it finds its intent, then the manifest of what came.
  [
    table(
      'run_outputs',
      [
        'run_id key NOT NULL',
        'attempt int NOT NULL',
        'state key NOT NULL', // collecting, kept, partial, failed; copying, copied (a cloud copy)
        'host text NOT NULL', // host name of the daemon that keeps the files (berth outputs reads them there)
        'dir text', // where on that host; NULL for a cloud copy
        'manifest_json text NOT NULL', // [{path, size, sha256}] of the files kept, container path relative to /
        'bytes bigint NOT NULL', // their total size
        'detail text', // why partial or failed, in words; a cloud copy's destination
        'started_at bigint NOT NULL', // ms since epoch
        'ended_at bigint', // ms; NULL while the transfer runs (or was cut by a daemon's death)
      ],
      'PRIMARY KEY (run_id, attempt)',
    ),
  ],

  // Version 14 (issue #40): content-addressed files a run needs, stored so that they survive a
  // restart and reach every daemon of a shared store: a task's packed workdir (tar.gz), put by
  // `berth submit` before the spec that names it by its sha256. In parts (./blobs.ts), each row
  // small enough for one statement; all parts of a blob are written in one transaction.
  [
    table(
      'blobs',
      [
        'sha256 key NOT NULL', // of the whole blob, lowercase hex
        'part int NOT NULL', // 0, 1, ...: the blob is its parts' data in order
        'data bytes NOT NULL',
        'size bigint NOT NULL', // the whole blob's, bytes
        'created_at bigint NOT NULL', // ms; one unreferenced for a day is deleted with the purge
      ],
      'PRIMARY KEY (sha256, part)',
    ),
  ],

  // Version 15 (issue #50): a submission's name costs the same however many runs are stored. Names
  // are unique among live runs (a second live `train` is `train-2`): the index answers "is this name
  // live" without reading the live runs, and the counter says which suffix a name tries next.
  [
    index('runs_live_name ON runs(name) WHERE ended_at IS NULL'),
    table('run_name_suffixes', [
      'name text NOT NULL PRIMARY KEY', // a name as submitted, while a live run holds it
      'next_n bigint NOT NULL', // the suffix its next submission tries first (2, 3, ...)
    ]),
  ],

  // Version 16 (issue #51): warm instances. A task that ended cleanly hands its instance to a warm
  // hold instead of destroying it (written in one transaction with its attempt's end of billing);
  // a later run of the same reuse key takes it (in one transaction with that run's attempt, which
  // then holds it), or it is released at idle_s and destroyed. One holder at every moment.
  [
    table('warm_holds', [
      'id serial',
      'instance_id bigint NOT NULL',
      'run_id key NOT NULL', // the run whose attempt handed it over
      'attempt int NOT NULL',
      'reuse_key key NOT NULL', // src/job-spec/reuse-key.ts: what a taker's spec must share
      'relax_level int NOT NULL', // the donor's: a taker at a lower level may not take it (its filters were stricter)
      'offer_id bigint NOT NULL',
      'machine_id bigint NOT NULL',
      'gpu_name text',
      'num_gpus int',
      'dph_total real NOT NULL', // billed $/h, disk included, as last listed
      'disk_dph real NOT NULL', // its disk's part
      'since bigint NOT NULL', // ms: the hand-over; it bills from then
      'idle_until bigint NOT NULL', // ms: released then (the container destroys itself about then too)
      'state key NOT NULL', // warm, taken, released
      'ended_at bigint', // ms: taken or released
      'ended_why text',
      'taken_run_id key',
      'taken_attempt int',
      'destroy_confirmed_at bigint', // a released hold's instance no longer listed: it bills no more
    ]),
    index(`warm_holds_live ON warm_holds(instance_id) WHERE state = 'warm'`),
    add('attempts', [
      'handed_at bigint', // ms: its instance went to a warm hold (it bills to the hold from then)
      'warm_hold_id bigint', // the warm hold whose instance this attempt took instead of a create
      'recycle_state key', // intent (the update + recycle may have been sent), sent (answered success)
      'recycle_sha key', // sha256 of the onstart the recycle sends: a restart reads it back in the record
    ]),
  ],
];
