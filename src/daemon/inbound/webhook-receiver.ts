// The listener for the service's signed webhooks (`webhooks.listen`, off by default), in the scheme
// of the service's guide (guides/reference/notification-webhooks.mdx). A delivery is acted on only
// when, in this order:
//   1. it is a POST of at most 64 KiB;
//   2. `X-Vast-Signature-256` is `sha256=` + hex HMAC-SHA256(secret, "<X-Vast-Timestamp>.<raw body>"),
//      compared in constant time, and the timestamp is within `webhooks.tolerance_s` of now: else 401;
//   3. its `event_id` (read from the signed body: the X-Vast-Event-Id header is not signed) was never
//      acted on. A repeat (the service's retry, or a replay) is answered 200 and not acted on again:
//      delivery is at-least-once, and a 4xx would only end the service's retries as a failure. Each
//      retry is signed anew with a fresh timestamp, so ids are kept in berth.db for REMEMBER_MS (far
//      beyond the service's retries), and a restart does not make the daemon act twice.
// Then, on the renter's events (notifications.mdx; `notif_type` is the slug without `client:`):
// `low_credit` reads the account's credit at once (creates wait while it is low); `outbid` ("your
// interruptible instance was outbid and paused") has the run holding that instance follow its
// `on_outbid` at once, as a list showing it stopped would; `instance_offline` ("your instance went
// down because of a problem on the host machine") fails that run over at once, as a list showing it
// offline would. The instance is read from the subject or message (the payload has no field for it),
// and the event's own `timestamp` keeps a late repeat from acting on a later state. Other events
// (the host's `machine_offline` among them: a renter is never sent it) are accepted and ignored.
// The secret, the signature and the body are never logged.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Clock } from '../../clock.js';
import { BodyTooLargeError, readRawBody } from '../../http/body.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';

const MAX_BODY_BYTES = 64 * 1024;
/**
 * How long an acted-on event id is remembered, ms. The service retries a failed delivery (each
 * attempt freshly signed) for hours; a week covers that with room to spare, at one small row each.
 */
const REMEMBER_MS = 7 * 86_400_000;

/** What a webhook says about one of the account's instances. */
export interface InstanceNotice {
  instanceId: number;
  /** When the service says the event happened (the payload's `timestamp`), ms. */
  at: number;
  /** For the run's event and the attempt's detail. */
  why: string;
  eventId: string;
}

export interface WebhookReceiverDeps {
  secret: string;
  toleranceS: number;
  store: Store;
  clock: Pick<Clock, 'now'>;
  log: Logger;
  /** A `client:low_credit` event: read the credit now. */
  onLowCredit(): void;
  /** A `client:outbid` event: the run holding the instance follows its on_outbid now; returns it, or null. */
  onOutbid(notice: InstanceNotice): string | null;
  /** A `client:instance_offline` event: the run holding the instance fails over now; returns it, or null. */
  onInstanceOffline(notice: InstanceNotice): string | null;
}

export type Verdict = { ok: true } | { ok: false; why: string };

/** Checks the signature and the timestamp of one delivery (step 2 above). */
export function verifyDelivery(
  headers: { timestamp: string | undefined; signature: string | undefined },
  raw: Buffer,
  secret: string,
  nowMs: number,
  toleranceS: number,
): Verdict {
  const { timestamp, signature } = headers;
  if (!timestamp || !/^\d{1,12}$/.test(timestamp)) return { ok: false, why: 'X-Vast-Timestamp is missing or not an integer' };
  const given = /^sha256=([0-9a-f]{64})$/i.exec(signature ?? '');
  if (!given) return { ok: false, why: 'X-Vast-Signature-256 is missing or not sha256=<hex>' };
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(raw).digest();
  if (!timingSafeEqual(Buffer.from(given[1]!, 'hex'), expected)) return { ok: false, why: 'the signature does not match' };
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > toleranceS)
    return { ok: false, why: `the timestamp is more than ${toleranceS} s from now` };
  return { ok: true };
}

/** The instance an instance event names ("Instance 123 was outbid", "... your instance #123 ..."), subject first. */
export function instanceIdOf(subject: unknown, message: unknown): number | null {
  for (const text of [subject, message]) {
    const m = typeof text === 'string' ? /\binstance\s+(?:id\s+)?#?(\d{1,12})\b/i.exec(text) : null;
    if (m) return Number(m[1]);
  }
  return null;
}

/** The payload's `timestamp` (float Unix seconds of the event) in ms, or null when it is not a plausible number. */
export function eventTimeMs(timestamp: unknown): number | null {
  return typeof timestamp === 'number' && Number.isFinite(timestamp) && timestamp > 0 ? Math.round(timestamp * 1000) : null;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly kind: string,
    message: string,
  ) {
    super(message);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readRaw(req: IncomingMessage): Promise<Buffer> {
  try {
    return await readRawBody(req, MAX_BODY_BYTES);
  } catch (err) {
    if (err instanceof BodyTooLargeError) throw new Refusal(413, 'too_large', `A delivery is at most ${MAX_BODY_BYTES / 1024} KiB.`);
    throw err;
  }
}

const header = (req: IncomingMessage, name: string) => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

export function createWebhookReceiver(deps: WebhookReceiverDeps): Server {
  const { log, store, clock } = deps;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST') throw new Refusal(405, 'method_not_allowed', 'Deliveries are POSTs.');
    const raw = await readRaw(req);
    const verdict = verifyDelivery(
      { timestamp: header(req, 'x-vast-timestamp'), signature: header(req, 'x-vast-signature-256') },
      raw,
      deps.secret,
      clock.now(),
      deps.toleranceS,
    );
    if (!verdict.ok) {
      log.warn({ remote: req.socket.remoteAddress }, `webhook delivery refused: ${verdict.why}`);
      throw new Refusal(401, 'unauthorized', `Refused: ${verdict.why}.`);
    }
    let event: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(raw.toString('utf8'));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      event = parsed as Record<string, unknown>;
    } catch {
      throw new Refusal(400, 'bad_request', 'The body is not a JSON object.');
    }
    const eventId = event['event_id'];
    if (typeof eventId !== 'string' || !/^[\w.:-]{1,200}$/.test(eventId))
      throw new Refusal(400, 'bad_request', 'event_id is missing or malformed.');
    const type = String(event['notif_type'] ?? '').replace(/^(client|host):/, '');
    const now = clock.now();
    let first: boolean;
    try {
      first = store.transaction(() => {
        store.webhookEvents.purgeBefore(now - Math.max(REMEMBER_MS, 2 * deps.toleranceS * 1000));
        return store.webhookEvents.firstTime(eventId, now, type.slice(0, 64));
      });
    } catch (err) {
      // Not recorded, so not acted on: the service retries a 503.
      log.warn({ eventId, err: toRunError(err) }, 'could not record a webhook delivery; the service will retry it');
      throw new Refusal(503, 'store_unavailable', 'Try again later.');
    }
    if (!first) {
      log.info({ eventId, type: type.slice(0, 64) }, 'webhook: this event was delivered before (a retry or a replay); not acted on again');
      return send(res, 200, { accepted: true, event_id: eventId, duplicate: true, acted: 'none' });
    }
    const acted = act(type, event, eventId);
    send(res, 200, { accepted: true, event_id: eventId, ...acted });
  }

  function act(type: string, event: Record<string, unknown>, eventId: string): Record<string, unknown> {
    if (type === 'low_credit') {
      log.info({ eventId }, 'webhook: the service reports low credit; reading the account credit now');
      deps.onLowCredit();
      return { acted: 'credit_check' };
    }
    if (type === 'outbid' || type === 'instance_offline') {
      const instanceId = instanceIdOf(event['subject'], event['message']);
      const at = eventTimeMs(event['timestamp']);
      if (instanceId === null || at === null) {
        log.warn({ eventId, type }, `webhook: ${type} names no instance or no event time; the next list decides`);
        return { acted: 'none' };
      }
      const what = type === 'outbid' ? 'outbid' : 'offline';
      const notice = { instanceId, at, eventId, why: `the service reports instance ${instanceId} ${what} (client:${type} webhook)` };
      const runId = type === 'outbid' ? deps.onOutbid(notice) : deps.onInstanceOffline(notice);
      log.info(
        { eventId, instanceId, runId },
        `webhook: instance ${instanceId} is ${what}; ${runId ? `run ${runId} acts on it now` : 'no run acts on it'}`,
      );
      return { acted: runId ? (type === 'outbid' ? 'on_outbid' : 'failover') : 'none', instance_id: instanceId, run: runId };
    }
    log.info({ eventId, type: type.slice(0, 64) }, 'webhook: event accepted, nothing to do for this type');
    return { acted: 'none' };
  }

  return createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof Refusal) return send(res, err.status, { error: { kind: err.kind, message: err.message } });
      log.error({ err: toRunError(err) }, 'webhook receiver error');
      send(res, 500, { error: { kind: 'internal', message: 'Internal error.' } });
    });
  });
}
