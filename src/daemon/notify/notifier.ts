// Run notifications (config `notify`): the outbox's writer and its one sender.
//
// `enqueue` adds a row per target that wants the event, inside the transaction that stores the
// event (the run driver's), so a killed daemon loses none. Sending never happens on a run's path:
// `enqueue` only writes and arms a 0 ms timer; the POSTs go from the Clock's timers, at most
// `notifications.max_concurrent` in flight per target, each cut off after `timeout_s`. A receiver
// that is slow or down therefore delays nothing but its own notifications.
//
// A delivery (src/store/outbox.ts): pending → POST (claimed: not due again before twice its timeout
// has passed, so a POST cut short by a crash goes again after the restart) → delivered on a 2xx, else
// pending again after a jittered backoff (1 s doubling, at most `max_delay_s`), until
// `retry_for_s` (24 h) after it was made: then dead. At least once: receivers dedupe by `id`.
// Claims and outcomes are written a batch per turn of the event loop, so a burst of notifications
// costs a few commits (each waits for the disk), not two per POST.
//
// Each POST carries `Berth-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` when
// the target names a `secret_env`. Neither the secret nor a target URL's path (often a secret of
// its own, as in Slack's webhook URLs) is ever logged: a target is named by its index and origin.
import { createHmac, randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { Agent } from 'undici';
import type { Clock } from '../../clock.js';
import type { Config, NotifyTargetConfig } from '../../config/schema.js';
import type { Logger } from '../../logger.js';
import { PeriodicLoop } from '../../periodic-loop.js';
import type { DeliveryOutcome, OutboxRow, Store } from '../../store/index.js';
import type { NotificationBody } from '../../wire/control-api.js';
import { NOTIFY_EVENTS, type NotifyEvent } from '../../wire/notify-events.js';
import type { RunState } from '../../wire/run-states.js';

/** The first wait after a failed POST; it doubles per failure up to `max_delay_s`. */
const FIRST_RETRY_MS = 1000;

export type DeliveryResult = 'delivered' | 'failed' | 'dead';

export interface NotifierOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  targets: readonly NotifyTargetConfig[];
  /** Values of the variables the targets' `secret_env` name. */
  secrets: Record<string, string>;
  settings: Config['notifications'];
  /** `User-Agent` of the POSTs. */
  userAgent: string;
  /** Each POST's result (for /metrics). */
  onResult?: (result: DeliveryResult) => void;
  /** Random source in [0, 1) for the backoff jitter; tests pass a fixed one. */
  random?: () => number;
  /**
   * Several daemons on one store: whether this one delivers now (it leads). The others' rows wait
   * in the shared outbox for the leader, so each is posted by one daemon at a time.
   */
  delivers?: () => boolean;
}

/**
 * Several daemons on one store: how often a daemon that does not lead looks whether it leads now,
 * and how often the leader looks for rows other daemons stored, ms.
 */
const SHARED_LOOK_MS = 2000;

/** What a notification tells: the event-log line it comes from. */
export interface NotifiedEvent {
  /** The event-log row, or null for an event that has none. */
  logId: number | null;
  message: string;
  data: unknown;
}

interface Target {
  index: number;
  url: URL;
  origin: string;
  events: ReadonlySet<NotifyEvent>;
  format: 'json' | 'slack';
  secret: string | undefined;
  inFlight: number;
  /** Failing since the last delivery: logged once when it starts and once when it ends. */
  failing: boolean;
}

/** `Berth-Signature` of a body sent at `unixS` (docs/notifications.md shows how to check it). */
function signature(secret: string, unixS: number, body: string): string {
  return `t=${unixS},v1=${createHmac('sha256', secret).update(`${unixS}.${body}`).digest('hex')}`;
}

function slackText(type: NotifyEvent, run: { id: string; name: string }, message: string): string {
  return `berth: run ${run.name} (${run.id}) ${type}: ${message}`;
}

/** Why a POST failed, in a few words without the URL: an HTTP status or an error code. */
function failureOf(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : (err as Error).name || 'error';
}

export class Notifier {
  private readonly targets: Target[];
  private readonly agent: Agent;
  private readonly abort = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  /** The sender's rounds (`pump`): each asks for the next when a delivery is due; none without. */
  private readonly sender: PeriodicLoop;
  /** Outcomes of POSTs not yet written, and the turn that writes them. */
  private readonly outcomes: Array<{ t: Target; result: DeliveryResult; outcome: DeliveryOutcome }> = [];
  private recordSoon: NodeJS.Immediate | undefined;
  private started = false;

  constructor(private readonly options: NotifierOptions) {
    // Every POST in flight listens on it (and stops listening when it ends): targets × max_concurrent.
    setMaxListeners(0, this.abort.signal);
    this.targets = options.targets.map((t, index) => {
      const url = new URL(t.url);
      return {
        index,
        url,
        origin: url.origin,
        events: new Set(t.events ?? NOTIFY_EVENTS),
        format: t.format,
        secret: t.secret_env === undefined ? undefined : options.secrets[t.secret_env],
        inFlight: 0,
        failing: false,
      };
    });
    const timeoutMs = options.settings.timeout_s * 1000;
    this.agent = new Agent({
      connect: { timeout: timeoutMs },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      keepAliveTimeout: 10_000,
    });
    this.sender = new PeriodicLoop({
      clock: options.clock,
      run: () => this.pump(),
      intervalMs: null,
      // The store refuses writes or reads: nothing is lost (the rows stay pending); try again later.
      onError: (err) =>
        options.log.warn({ err: { message: (err as Error).message } }, 'cannot read or claim notifications now; trying again in 1 s'),
      backoff: { firstMs: FIRST_RETRY_MS, maxMs: FIRST_RETRY_MS },
    });
  }

  /** True when some target wants notifications of this type. */
  wants(type: NotifyEvent): boolean {
    return this.targets.some((t) => t.events.has(type));
  }

  /**
   * Adds a delivery for every target that wants `type`. Call inside the transaction that stores
   * the event: the rows commit with it or not at all. Returns the notification's id (null when no
   * target wants it).
   */
  enqueue(run: { id: string; name: string; state: RunState }, type: NotifyEvent, event: NotifiedEvent, at: number): string | null {
    const targets = this.targets.filter((t) => t.events.has(type));
    if (targets.length === 0) return null;
    const id = randomUUID();
    const json: NotificationBody = {
      id,
      type,
      at: new Date(at).toISOString(),
      run: { id: run.id, name: run.name, state: run.state },
      message: event.message,
      data: event.data ?? null,
      log_id: event.logId,
    };
    const bodies = { json: JSON.stringify(json), slack: JSON.stringify({ text: slackText(type, run, event.message) }) };
    for (const t of targets) {
      this.options.store.outbox.add({
        id,
        type,
        runId: run.id,
        logId: event.logId,
        target: t.index,
        targetUrl: t.url.href,
        body: bodies[t.format],
        at,
      });
    }
    this.wake();
    return id;
  }

  /** Starts sending: what an earlier process left pending goes too. Rows for targets no longer configured are dead. */
  start(): void {
    if (this.started || this.stopped) return;
    // Before `started`: a store that refuses this write (berth.db locked) lets the start be tried again.
    const dead = this.options.store.outbox.orphaned(
      this.targets.map((t) => t.url.href),
      this.options.clock.now(),
    );
    this.started = true;
    if (dead > 0) this.options.log.warn({ notifications: dead }, 'notifications for targets no longer in the config (notify) are dead');
    this.wake();
  }

  /**
   * Abandons the POSTs in flight and stops. They stay pending: a later start sends them again once
   * their claim has lapsed (2 × notifications.timeout_s after they were sent), under the same id.
   */
  async stop(): Promise<void> {
    this.sender.stop();
    this.abort.abort();
    await Promise.allSettled([...this.inFlight]);
    // What finished before the stop is kept; what was cut short stays pending.
    if (this.recordSoon) clearImmediate(this.recordSoon);
    this.record();
    await this.agent.destroy().catch(() => undefined);
  }

  private get stopped(): boolean {
    return this.sender.stopped;
  }

  /** Sends what is due soon, off the caller's path. */
  private wake(): void {
    if (this.started) this.sender.soon(0);
  }

  /** Sends every due delivery a target has room for, then sleeps until the next one is due. */
  private pump(): void {
    // Another daemon leads and delivers (several daemons on one store): look again later.
    if (this.options.delivers && !this.options.delivers()) return this.sender.soon(SHARED_LOOK_MS);
    const { store, clock, settings } = this.options;
    const now = clock.now();
    const due: Array<{ t: Target; row: OutboxRow }> = [];
    for (const t of this.targets) {
      const room = settings.max_concurrent - t.inFlight;
      if (room > 0) for (const row of store.outbox.due(t.url.href, now, room)) due.push({ t, row });
    }
    if (due.length > 0) {
      // Should the daemon die meanwhile, these POSTs are due again once twice their timeout has passed.
      const claimed = new Set(
        store.outbox.claim(
          due.map((d) => d.row.seq),
          now + 2 * settings.timeout_s * 1000,
        ),
      );
      for (const { t, row } of due) if (claimed.has(row.seq)) this.send(t, row);
    }
    const open = this.targets.filter((t) => t.inFlight < settings.max_concurrent).map((t) => t.url.href);
    const next = open.length > 0 ? store.outbox.nextDueAt(open) : null;
    // On a shared store other daemons add rows without waking this one: it looks every while.
    const look = this.options.delivers ? now + SHARED_LOOK_MS : null;
    const at = next === null ? look : look === null ? next : Math.min(next, look);
    if (at !== null) this.sender.soon(at - now);
  }

  private send(t: Target, row: OutboxRow): void {
    t.inFlight++;
    const p = this.post(t, row, row.attempts + 1)
      .then(
        () => this.settled(t, row, null),
        (err: unknown) => this.settled(t, row, err),
      )
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  private async post(t: Target, row: OutboxRow, attempt: number): Promise<void> {
    const { clock, settings, userAgent } = this.options;
    const timeout = new AbortController();
    const timer = clock.setTimer(
      () => timeout.abort(Object.assign(new Error('timed out'), { code: 'TIMEOUT' })),
      settings.timeout_s * 1000,
    );
    const onStop = () => timeout.abort(Object.assign(new Error('the daemon is stopping'), { code: 'STOPPING' }));
    this.abort.signal.addEventListener('abort', onStop, { once: true });
    try {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': userAgent,
        'berth-event-id': row.id,
        'berth-event-type': row.type,
        'berth-delivery-attempt': String(attempt),
      };
      if (t.secret !== undefined) headers['berth-signature'] = signature(t.secret, Math.floor(clock.now() / 1000), row.body);
      const res = await this.agent.request({
        origin: t.origin,
        path: t.url.pathname + t.url.search,
        method: 'POST',
        headers,
        body: row.body,
        signal: timeout.signal,
      });
      await res.body.dump();
      if (res.statusCode < 200 || res.statusCode >= 300)
        throw Object.assign(new Error(`HTTP ${res.statusCode}`), { code: `HTTP ${res.statusCode}` });
    } catch (err) {
      // undici rejects with the signal's reason when it fired.
      throw timeout.signal.aborted ? timeout.signal.reason : err;
    } finally {
      timer.cancel();
      this.abort.signal.removeEventListener('abort', onStop);
    }
  }

  /** What became of one POST: recorded with the others of this turn in one transaction. */
  private settled(t: Target, row: OutboxRow, err: unknown): void {
    if (this.stopped) return; // abandoned: still pending, claimed until its timeout has passed
    const { clock, settings, log } = this.options;
    const now = clock.now();
    const where = { target: t.index, origin: t.origin, notification: row.id, type: row.type, runId: row.run_id };
    if (err === null) {
      this.outcomes.push({ t, result: 'delivered', outcome: { seq: row.seq, kind: 'delivered', at: now } });
      if (t.failing) log.info(where, `notify target ${t.index} (${t.origin}) takes notifications again`);
      t.failing = false;
    } else {
      const why = failureOf(err);
      const attempts = row.attempts + 1;
      const deadline = row.created_at + settings.retry_for_s * 1000;
      if (now >= deadline) {
        this.outcomes.push({ t, result: 'dead', outcome: { seq: row.seq, kind: 'dead', at: now, error: why } });
        log.warn(
          { ...where, attempts, error: why },
          `notification ${row.id} is dead: ${attempts} POSTs to target ${t.index} (${t.origin}) failed over ${settings.retry_for_s} s (last: ${why})`,
        );
      } else {
        const backoff = Math.min(settings.max_delay_s * 1000, FIRST_RETRY_MS * 2 ** Math.min(attempts - 1, 30));
        const nextAt = Math.min(now + backoff * (0.5 + (this.options.random ?? Math.random)() / 2), deadline);
        this.outcomes.push({ t, result: 'failed', outcome: { seq: row.seq, kind: 'failed', nextAt, error: why } });
        if (!t.failing)
          log.warn(
            { ...where, error: why },
            `notify target ${t.index} (${t.origin}) fails (${why}); its notifications are retried with backoff`,
          );
        else log.debug({ ...where, attempts, error: why }, 'notification POST failed; retrying');
        t.failing = true;
      }
    }
    this.recordSoon ??= setImmediate(() => this.record());
  }

  /** Writes the outcomes of this turn's POSTs in one transaction, frees their slots and sends on. */
  private record(): void {
    this.recordSoon = undefined;
    const batch = this.outcomes.splice(0);
    if (batch.length === 0) return;
    try {
      this.options.store.outbox.settle(batch.map((b) => b.outcome));
      for (const b of batch) this.options.onResult?.(b.result);
    } catch (err) {
      // Not recorded: the claims run out and these POSTs go again (at least once).
      this.options.log.warn(
        { err: { message: (err as Error).message }, notifications: batch.length },
        'cannot record notification POSTs; they will be sent again',
      );
    }
    for (const b of batch) b.t.inFlight--;
    this.sender.soon(0);
  }
}
