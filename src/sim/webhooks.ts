// Notification webhooks: the account's subscriptions and their deliveries.
// A delivery is `POST webhook_url` with JSON `{event_type, created_at, data}` and the header
// `X-Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>` (the seed
// shows no scheme; this one binds the time to the body so a receiver can refuse replays).
// Deliveries are fire-and-forget: the request that caused the event never waits, and a failure is
// recorded in `deliveries()`, never thrown. No retries.
import { createHmac, randomBytes } from 'node:crypto';
import type { SimClock } from './clock.js';

export const EVENT_TYPES = [
  'client:low_credit',
  'client:outbid',
  'host:machine_offline',
  'instance_created',
  'instance_started',
  'instance_stopped',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface WebhookRecord {
  id: number;
  user_id: number;
  name: string;
  webhook_url: string;
  event_types: string[];
  created_at: number;
  updated_at: number;
  webhook_secret: string;
}

export type PublicWebhook = Omit<WebhookRecord, 'webhook_secret'>;

export interface Delivery {
  webhook_id: number;
  event_type: EventType;
  url: string;
  /** Wall ms when sent. */
  sent_at: number;
  /** HTTP status of the receiver's answer, null when none came. */
  status: number | null;
  error: string | null;
  body: string;
}

export function signWebhook(secret: string, unixSeconds: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

const newSecret = () => `whsec_${randomBytes(24).toString('hex')}`;

export class WebhookStore {
  private readonly hooks = new Map<number, WebhookRecord>();
  private readonly sent: Delivery[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private nextId = 1;

  constructor(
    private readonly userId: number,
    private readonly clock: SimClock,
    private readonly timeoutMs: number,
  ) {}

  private nowS(): number {
    return Math.floor(this.clock.wallMs() / 1000);
  }

  list(): PublicWebhook[] {
    return [...this.hooks.values()].map(hidden);
  }

  /** The new record, secret included (the one time besides rotation that it is shown). */
  create(name: string, url: string, eventTypes: string[], secret?: string): WebhookRecord {
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
    return rec;
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

  emit(eventType: EventType, data: Record<string, unknown>): void {
    for (const hook of this.hooks.values()) {
      if (!hook.event_types.includes(eventType)) continue;
      const p = this.deliver(hook, eventType, data).finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    }
  }

  deliveries(): Delivery[] {
    return this.sent;
  }

  async close(): Promise<void> {
    this.abort.abort();
    await Promise.all([...this.inFlight]);
  }

  private async deliver(hook: WebhookRecord, eventType: EventType, data: Record<string, unknown>): Promise<void> {
    const t = this.nowS();
    const body = JSON.stringify({ event_type: eventType, created_at: t, data });
    const record: Delivery = { webhook_id: hook.id, event_type: eventType, url: hook.webhook_url, sent_at: this.clock.wallMs(), status: null, error: null, body };
    this.sent.push(record);
    try {
      const res = await fetch(hook.webhook_url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-webhook-id': String(hook.id),
          'x-webhook-event': eventType,
          'x-webhook-signature': signWebhook(hook.webhook_secret, t, body),
        },
        body,
        signal: AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.timeoutMs)]),
      });
      record.status = res.status;
      await res.body?.cancel();
    } catch (err) {
      record.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    }
  }
}

function hidden({ webhook_secret: _secret, ...rest }: WebhookRecord): PublicWebhook {
  return rest;
}
