// Notification webhooks: the account's subscriptions and their deliveries, in the scheme of
// guides/reference/notification-webhooks.mdx.
//
// A delivery is `POST webhook_url` with the JSON payload
// `{event_id, user_id, notif_type, subject, message, timestamp}` and the headers
// `X-Vast-Event-Id`, `X-Vast-Delivery-Attempt` (1, 2, ...), `X-Vast-Timestamp` (integer Unix
// seconds of this attempt) and `X-Vast-Signature-256: sha256=<hex HMAC-SHA256(secret,
// "<timestamp>.<raw body>")>`, signed with the webhook's secret at the time of the attempt.
//
// An event's life: attempt 1 is sent at once, without blocking the request that caused it. Its
// outcome: 2xx delivered; 3xx (redirects are not followed) and 4xx other than 408/429 fail for
// good; 408, 429, 5xx, a timeout (10 s) or a connection error are retried after
// `retry_delays_s[n]` sim seconds, on the world's tick, until the delays run out. A test delivery
// (`webhook_test`) is never retried. Every attempt is recorded in `deliveries()`, never thrown.
import { createHmac, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import type { SimClock } from './clock.js';
import type { SimConfig } from './config.js';

/**
 * Subscription keys the docs name (notification-webhooks.mdx, notifications.mdx and the examples'
 * slugs). `host:machine_offline` is a host's event: it may be subscribed to, but this account hosts
 * no machine, so the simulator never sends it (a renter learns of its instance with
 * `client:instance_offline`).
 */
export const EVENT_TYPES = [
  'client:low_credit',
  'client:outbid',
  'client:instance_created',
  'client:instance_started',
  'client:instance_stopped',
  'client:instance_offline',
  'client:instance_online',
  'client:upcoming_downtime',
  'host:machine_offline',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface WebhookRecord {
  id: number;
  user_id: number;
  name: string | null;
  webhook_url: string;
  event_types: string[];
  created_at: number;
  updated_at: number;
  webhook_secret: string;
}

export type PublicWebhook = Omit<WebhookRecord, 'webhook_secret'>;

/** One attempt of one event to one webhook. */
export interface Delivery {
  event_id: string;
  webhook_id: number;
  /** The subscription key, or `webhook_test`. */
  event_type: string;
  url: string;
  attempt: number;
  /** Wall ms when sent. */
  sent_at: number;
  /** HTTP status of the receiver's answer, null when none came. */
  status: number | null;
  error: string | null;
  /** `delivered`, `retry` (another attempt is scheduled) or `failed` (no more attempts). */
  outcome: 'delivered' | 'retry' | 'failed' | 'pending';
  body: string;
}

export interface WebhookEvent {
  subject: string;
  message: string;
}

/** The signature header's value for `body` sent with `X-Vast-Timestamp: unixSeconds`. */
export function signWebhook(secret: string, unixSeconds: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex')}`;
}

const newSecret = () => `whsec_${randomBytes(24).toString('hex')}`;

interface Pending {
  dueSimS: number;
  hookId: number;
  eventType: string;
  eventId: string;
  body: string;
  attempt: number;
}

export class WebhookStore {
  private readonly hooks = new Map<number, WebhookRecord>();
  private readonly sent: Delivery[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private readonly pending: Pending[] = [];
  private readonly abort = new AbortController();
  private nextId = 1;

  constructor(
    private readonly userId: number,
    private readonly clock: SimClock,
    private readonly cfg: SimConfig['webhooks'],
  ) {}

  private nowS(): number {
    return Math.floor(this.clock.wallMs() / 1000);
  }

  count(): number {
    return this.hooks.size;
  }

  get(id: number): PublicWebhook | undefined {
    const rec = this.hooks.get(id);
    return rec && hidden(rec);
  }

  list(): PublicWebhook[] {
    return [...this.hooks.values()].map(hidden);
  }

  /** The new record, secret included (the one time besides rotation that it is shown). */
  create(name: string | null, url: string, eventTypes: string[], secret?: string): WebhookRecord {
    const t = this.nowS();
    const rec: WebhookRecord = {
      id: this.nextId++,
      user_id: this.userId,
      name,
      webhook_url: url,
      event_types: eventTypes,
      created_at: t,
      updated_at: t,
      webhook_secret: secret ?? newSecret(),
    };
    this.hooks.set(rec.id, rec);
    return { ...rec };
  }

  update(id: number, patch: Partial<Pick<WebhookRecord, 'name' | 'webhook_url' | 'event_types'>>): PublicWebhook | undefined {
    const rec = this.hooks.get(id);
    if (!rec) return undefined;
    Object.assign(rec, patch, { updated_at: this.nowS() });
    return hidden(rec);
  }

  delete(id: number): boolean {
    return this.hooks.delete(id);
  }

  rotate(id: number): WebhookRecord | undefined {
    const rec = this.hooks.get(id);
    if (!rec) return undefined;
    rec.webhook_secret = newSecret();
    rec.updated_at = this.nowS();
    return { ...rec };
  }

  /** Sends the event to every webhook subscribed to it. */
  emit(eventType: EventType, event: WebhookEvent): void {
    for (const hook of this.hooks.values()) {
      if (hook.event_types.includes(eventType)) this.start(hook, eventType, event, true);
    }
  }

  /** The documented test endpoint: one `webhook_test` delivery, never retried. False when the id is unknown. */
  test(id: number): boolean {
    const hook = this.hooks.get(id);
    if (!hook) return false;
    this.start(
      hook,
      'webhook_test',
      { subject: 'Test notification', message: 'This is a test delivery of your Vast.ai notification webhook.' },
      false,
    );
    return true;
  }

  /** Sends the retries whose time has come (called on the world's tick). */
  tick(): void {
    const now = this.clock.simS();
    for (let i = this.pending.length - 1; i >= 0; i--) {
      const p = this.pending[i]!;
      if (p.dueSimS > now) continue;
      this.pending.splice(i, 1);
      const hook = this.hooks.get(p.hookId);
      if (hook) this.send(hook, p, true); // a deleted webhook gets no more attempts
    }
  }

  deliveries(): Delivery[] {
    return this.sent;
  }

  async close(): Promise<void> {
    this.abort.abort();
    this.pending.length = 0;
    await Promise.all([...this.inFlight]);
  }

  private start(hook: WebhookRecord, eventType: string, event: WebhookEvent, retry: boolean): void {
    const eventId = randomBytes(16).toString('hex');
    const slug = eventType.slice(eventType.indexOf(':') + 1); // the payload names the type without its context
    const body = JSON.stringify({
      event_id: eventId,
      user_id: this.userId,
      notif_type: slug,
      subject: event.subject,
      message: event.message,
      timestamp: this.clock.wallMs() / 1000,
    });
    this.send(hook, { dueSimS: 0, hookId: hook.id, eventType, eventId, body, attempt: 1 }, retry);
  }

  private send(hook: WebhookRecord, p: Pending, retry: boolean): void {
    const done = this.deliver(hook, p, retry).finally(() => this.inFlight.delete(done));
    this.inFlight.add(done);
  }

  private async deliver(hook: WebhookRecord, p: Pending, retry: boolean): Promise<void> {
    const t = this.nowS();
    const record: Delivery = {
      event_id: p.eventId,
      webhook_id: hook.id,
      event_type: p.eventType,
      url: hook.webhook_url,
      attempt: p.attempt,
      sent_at: this.clock.wallMs(),
      status: null,
      error: null,
      outcome: 'pending',
      body: p.body,
    };
    this.sent.push(record);
    let retryable: boolean;
    const refused = refusedTarget(hook.webhook_url);
    if (refused) {
      record.error = refused;
      retryable = false;
    } else {
      // A timer of our own, not AbortSignal.timeout(): a timeout signal referenced only through
      // AbortSignal.any() can be garbage-collected before it fires, and a receiver that never
      // answers then holds the delivery for good (seen under load).
      const timedOut = new AbortController();
      const timer = setTimeout(
        () => timedOut.abort(new DOMException('The delivery timed out', 'TimeoutError')),
        this.cfg.delivery_timeout_ms,
      );
      try {
        const res = await fetch(hook.webhook_url, {
          method: 'POST',
          redirect: 'manual',
          headers: {
            'content-type': 'application/json',
            'x-vast-event-id': p.eventId,
            'x-vast-delivery-attempt': String(p.attempt),
            'x-vast-timestamp': String(t),
            'x-vast-signature-256': signWebhook(hook.webhook_secret, t, p.body),
          },
          body: p.body,
          signal: AbortSignal.any([this.abort.signal, timedOut.signal]),
        });
        record.status = res.status;
        await res.body?.cancel();
        retryable = res.status === 408 || res.status === 429 || res.status >= 500;
        if (res.status >= 200 && res.status < 300) {
          record.outcome = 'delivered';
          return;
        }
      } catch (err) {
        record.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        retryable = !this.abort.signal.aborted;
      } finally {
        clearTimeout(timer);
      }
    }
    const delay = this.cfg.retry_delays_s[p.attempt - 1];
    if (retry && retryable && delay !== undefined) {
      record.outcome = 'retry';
      this.pending.push({ ...p, attempt: p.attempt + 1, dueSimS: this.clock.simS() + delay });
    } else {
      record.outcome = 'failed';
    }
  }
}

/**
 * Why a delivery target is refused at delivery time: the service rejects private network targets.
 * Loopback stays allowed in the simulator so that tests can receive deliveries.
 */
function refusedTarget(url: string): string | null {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) === 4 && /^(10\.|192\.168\.|169\.254\.|172\.(1[6-9]|2\d|3[01])\.)/.test(host)) {
    return `private network target ${host} refused`;
  }
  if (isIP(host) === 6 && /^(f[cd]|fe80)/i.test(host)) return `private network target ${host} refused`;
  return null;
}

/** Loopback hosts, the only ones `http://` is accepted for (a simulator deviation; the service takes HTTPS only). */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

function hidden({ webhook_secret: _secret, ...rest }: WebhookRecord): PublicWebhook {
  return rest;
}
