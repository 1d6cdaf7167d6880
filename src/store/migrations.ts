// Schema history. Each entry moves the database from user_version i to i+1; all run in one
// immediate transaction at open, so a crash mid-migration leaves the old version intact.
export const MIGRATIONS: string[] = [
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

  CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
    name            TEXT NOT NULL,
    spec_json       TEXT NOT NULL,      -- the resolved job spec, env values included (needed to create)
    state           TEXT NOT NULL,      -- queued searching creating booting running destroying failed cancelled
    created_at      INTEGER NOT NULL,   -- ms since epoch
    updated_at      INTEGER NOT NULL,
    ended_at        INTEGER,
    idempotency_key TEXT UNIQUE,
    relax_level     INTEGER NOT NULL DEFAULT 0,
    attempt         INTEGER NOT NULL DEFAULT 0,
    error_json      TEXT,
    snapshot_json   TEXT,               -- xstate persisted snapshot
    machine_version INTEGER
  );
  CREATE INDEX runs_live ON runs(state) WHERE ended_at IS NULL;

  -- One row per offer tried. It is also the journal of the create: the row is written with
  -- create_state 'intent' before the create call, so a restarted daemon knows a call may have
  -- reached the service and looks for the label before doing anything else.
  CREATE TABLE attempts (
    run_id        TEXT NOT NULL REFERENCES runs(id),
    n             INTEGER NOT NULL,
    offer_id      INTEGER NOT NULL,
    machine_id    INTEGER,
    dph_total     REAL,
    label         TEXT NOT NULL UNIQUE,
    create_state  TEXT NOT NULL,        -- intent created offer_gone failed
    create_detail TEXT,
    instance_id   INTEGER,
    actual_status TEXT,
    status_msg    TEXT,
    ssh_host      TEXT,
    ssh_port      INTEGER,
    outcome       TEXT,
    detail        TEXT,
    destroy_state TEXT NOT NULL DEFAULT 'none',  -- none requested confirmed
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER,
    PRIMARY KEY (run_id, n)
  );
  CREATE INDEX attempts_instance ON attempts(instance_id);

  CREATE TABLE events (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id    TEXT NOT NULL,
    at        INTEGER NOT NULL,
    type      TEXT NOT NULL,
    message   TEXT NOT NULL,
    data_json TEXT
  );
  CREATE INDEX events_run ON events(run_id, id);
  `,
  // Version 2 (issue #14): restored stores, durable cancels, idempotency conflicts, bounded events.
  `
  -- Set on the runs a restored database still showed live: they wait for \`berth resume\` or a cancel.
  ALTER TABLE runs ADD COLUMN held_at INTEGER;
  -- A cancel asked for through the API, kept so that it is carried out even if the run's actor was not running.
  ALTER TABLE runs ADD COLUMN cancel_requested_at INTEGER;
  -- sha256 of the submitted spec (canonical JSON), to tell a repeated submission from a key reused for another spec.
  ALTER TABLE runs ADD COLUMN request_hash TEXT;
  CREATE INDEX runs_ended ON runs(ended_at) WHERE ended_at IS NOT NULL;

  -- Consecutive repeats of an event (a search retried through an outage) fold into one row.
  ALTER TABLE events ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE events ADD COLUMN first_at INTEGER;
  ALTER TABLE events ADD COLUMN fold_key TEXT;
  CREATE INDEX events_at ON events(at);

  INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', '0');
  `,
  // Version 3 (issue #10): destroy_state was written and never read; what the money guard needs
  // per attempt instead. Rows written before get what the event log says (or the nearest bound).
  `
  ALTER TABLE attempts DROP COLUMN destroy_state;
  -- When the create that made the instance was sent: it cannot have billed before.
  ALTER TABLE attempts ADD COLUMN instance_created_at INTEGER;
  -- When a list first showed the instance running.
  ALTER TABLE attempts ADD COLUMN first_running_at INTEGER;
  -- When a list taken after the destroy no longer showed the instance; NULL while it may still bill.
  ALTER TABLE attempts ADD COLUMN destroy_confirmed_at INTEGER;

  UPDATE attempts SET instance_created_at = started_at WHERE instance_id IS NOT NULL;
  UPDATE attempts SET first_running_at = (
    SELECT min(e.at) FROM events e
    WHERE e.run_id = attempts.run_id AND e.type = 'attempt.running' AND json_extract(e.data_json, '$.n') = attempts.n
  ) WHERE instance_id IS NOT NULL;
  -- An attempt that held an instance ends only once its destroy is confirmed.
  UPDATE attempts SET destroy_confirmed_at = COALESCE((
    SELECT min(e.at) FROM events e
    WHERE e.run_id = attempts.run_id AND e.type = 'destroy.confirmed' AND json_extract(e.data_json, '$.n') = attempts.n
  ), ended_at) WHERE instance_id IS NOT NULL AND ended_at IS NOT NULL;
  `,
  // Version 4 (issue #11, the money guard): what a price change leaves behind, and the webhook
  // deliveries already acted on.
  `
  -- $ the attempt's instance accrued before its current price applied (a bid raised, or the list
  -- showing another dph_total), and since when the current dph_total applies (NULL: from the start).
  ALTER TABLE attempts ADD COLUMN usd_before REAL NOT NULL DEFAULT 0;
  ALTER TABLE attempts ADD COLUMN dph_since INTEGER;
  -- The instances that may bill now (and creates in flight): the $/h cap and every run's price.
  CREATE INDEX attempts_billing ON attempts(run_id) WHERE destroy_confirmed_at IS NULL AND create_state IN ('intent', 'created');
  -- Instances that stopped billing lately: the spend of the last 24 h.
  CREATE INDEX attempts_confirmed ON attempts(destroy_confirmed_at) WHERE destroy_confirmed_at IS NOT NULL;

  -- Signed webhook deliveries acted on, by the event id inside the signed body: a replay within the
  -- timestamp tolerance is refused, also after a restart. Rows older than the tolerance are deleted.
  CREATE TABLE webhook_events (
    event_id    TEXT PRIMARY KEY,
    received_at INTEGER NOT NULL,
    notif_type  TEXT NOT NULL
  );
  CREATE INDEX webhook_events_at ON webhook_events(received_at);
  `,
  // Version 5 (issue #12): how an attempt became ready and where SSH answered, and its container's
  // last log lines when it failed.
  `
  -- When the run took the instance as ready, and how: 'ssh' (a banner), 'status' or 'callback'.
  ALTER TABLE attempts ADD COLUMN ready_at INTEGER;
  ALTER TABLE attempts ADD COLUMN ready_via TEXT;
  -- JSON [{kind: 'proxy'|'direct', host, port}]: the endpoints that answered with a banner (via
  -- 'ssh'), else the ones the list showed.
  ALTER TABLE attempts ADD COLUMN ssh_endpoints TEXT;
  -- The last lines of the container's log (at most 4 KB, secrets removed), fetched when it failed.
  ALTER TABLE attempts ADD COLUMN log_tail TEXT;
  `,
  // Version 6 (issue #13): the notification outbox. A row is written in the transaction that stores
  // its event, so a killed daemon loses none; it is POSTed until delivered or dead.
  `
  CREATE TABLE outbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL,       -- the notification's id: the same for every target; receivers dedupe by it
    type         TEXT NOT NULL,       -- run.running attempt.failed instance.lost run.failed run.cancelled run.expired budget.warning
    run_id       TEXT NOT NULL,
    log_id       INTEGER,             -- the event-log row it tells of
    target       INTEGER NOT NULL,    -- its place in the config's notify list when it was made
    target_url   TEXT NOT NULL,       -- where it goes (the path of a webhook URL is often a secret: never shown)
    body         TEXT NOT NULL,       -- exactly what is POSTed
    state        TEXT NOT NULL DEFAULT 'pending',  -- pending delivered dead
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    next_at      INTEGER,             -- pending: when it may be POSTed (again)
    finished_at  INTEGER,             -- delivered or dead: when (retention counts from it)
    last_error   TEXT
  );
  CREATE INDEX outbox_due ON outbox(target_url, next_at) WHERE state = 'pending';
  CREATE INDEX outbox_finished ON outbox(finished_at) WHERE state <> 'pending';

  -- What runs deleted by retention had spent, so that the spend counter of /metrics never goes down.
  INSERT OR IGNORE INTO meta (key, value) VALUES ('purged_spend_usd', '0');
  `,
  // Version 7 (issue #18): the per-instance keys (CONTAINER_API_KEY) a create answered with, so that
  // a restarted daemon still scrubs them from the container logs it keeps. A table of its own, so
  // that no attempt row (read whole into the run view) ever carries one; deleted once the
  // instance's destroy is confirmed.
  `
  CREATE TABLE instance_keys (
    instance_id INTEGER PRIMARY KEY,
    key         TEXT NOT NULL
  );
  `,
  // Version 8 (issue #21 item 2): a lease per live run, held by the daemon that acts for it
  // (src/store/leases.ts). Postgres's migration 2 makes the same table.
  `
  CREATE TABLE run_leases (
    run_id     TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,     -- the daemon's id
    epoch      INTEGER NOT NULL,  -- grows each time the run changes hands: fences an old owner's writes
    expires_at INTEGER NOT NULL   -- ms since epoch; past it, any daemon may take the run
  );
  CREATE INDEX run_leases_expiry ON run_leases(expires_at);
  `,
  // Version 9 (issue #22): the GPU the attempt's offer rents, as the search listed it, so that the
  // run shows the model rented rather than the one asked for. NULL for attempts journaled before.
  // Postgres's migration 3 adds the same columns.
  `
  ALTER TABLE attempts ADD COLUMN gpu_name TEXT;   -- the offer's gpu_name, e.g. 'RTX 4090'
  ALTER TABLE attempts ADD COLUMN num_gpus INTEGER; -- how many of them the offer rents
  `,
  // Version 10 (issue #21 item 4): the next free moment of each rate group, shared by the daemons of
  // one store (src/store/rate-slots.ts). Postgres's migration 4 makes the same table.
  `
  CREATE TABLE rate_slots (
    grp     TEXT PRIMARY KEY,  -- a rate group: search, create, list, ...
    next_at INTEGER NOT NULL   -- ms since epoch (the database's clock): the earliest the group's next call may go
  );
  `,
  // Version 11 (issue #21 item 4): the account's instances as the leading daemon's lists showed them,
  // read by the other daemons of the store instead of listing the account themselves
  // (src/store/sightings.ts). Postgres's migration 5 makes the same table.
  `
  CREATE TABLE instance_sightings (
    instance_id   INTEGER PRIMARY KEY,
    instance_json TEXT NOT NULL,    -- the fields berth reads of the instance's record
    listed_at     INTEGER NOT NULL, -- ms (the database's clock): when the list that showed it was asked for
    swept_at      INTEGER,          -- ms: the start of the latest sweep of the whole account that showed it
    written_at    INTEGER NOT NULL  -- ms: when it was written (readers' mark)
  );
  CREATE INDEX instance_sightings_written ON instance_sightings(written_at);
  `,
];
