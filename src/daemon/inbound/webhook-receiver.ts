// The listener for the service's signed webhooks (`webhooks.listen`, off by default), in the scheme
// of the service's guide (guides/reference/notification-webhooks.mdx). A delivery is acted on only
// when, in this order:
//   1. it is a POST of at most 64 KiB;
//   2. `X-Vast-Signature-256` is `sha256=` + hex HMAC-SHA256(secret, "<X-Vast-Timestamp>.<raw body>"),
//      compared in constant time, and the timestamp is within `webhooks.tolerance_s` of now: else 401;
//   3. its `event_id` (read from the signed body: the X-Vast-Event-Id header is not signed) was never
//      acted on: else 409. Ids are kept in berth.db as long as a replay could pass step 2, so a
//      restart does not make the daemon act twice.
// Then: `low_credit` reads the account's credit at once (creates wait while it is low);
// `machine_offline` fails over every run with an instance on that machine at once, as a list that
// showed the instance offline would (the machine id is read from the subject or message: the
// payload has no field for it). Other events are accepted and ignored. The secret, the signature
// and the body are never logged.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';

const MAX_BODY_BYTES = 64 * 1024;

export interface WebhookReceiverDeps {
  secret: string;
  toleranceS: number;
  store: Store;
  clock: Pick<Clock, 'now'>;
  log: Logger;
  /** A `client:low_credit` event: read the credit now. */
  onLowCredit(): void;
  /** A `host:machine_offline` event: the runs with an instance on this machine fail over; returns them. */
  onMachineOffline(machineId: number, why: string): string[];
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

/** The machine a `machine_offline` event names ("Machine 123 is offline", "... on machine 123 ..."). */
export function machineIdOf(subject: unknown, message: unknown): number | null {
  for (const text of [subject, message]) {
    const m = typeof text === 'string' ? /\bmachine\s+(?:id\s+)?#?(\d{1,12})\b/i.exec(text) : null;
    if (m) return Number(m[1]);
  }
  return null;
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
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Refusal(413, 'too_large', `A delivery is at most ${MAX_BODY_BYTES / 1024} KiB.`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
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
        store.webhookEvents.purgeBefore(now - 2 * deps.toleranceS * 1000);
        return store.webhookEvents.firstTime(eventId, now, type.slice(0, 64));
      });
    } catch (err) {
      // Not recorded, so not acted on: the service retries a 503.
      log.warn({ eventId, err: toRunError(err) }, 'could not record a webhook delivery; the service will retry it');
      throw new Refusal(503, 'store_unavailable', 'Try again later.');
    }
    if (!first) {
      log.warn({ eventId, type }, 'webhook delivery refused: this event was already acted on (a replay or a repeated delivery)');
      throw new Refusal(409, 'replayed', `Event ${eventId} was already acted on.`);
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
    if (type === 'machine_offline') {
      const machineId = machineIdOf(event['subject'], event['message']);
      if (machineId === null) {
        log.warn({ eventId }, 'webhook: machine_offline names no machine id; nothing to do');
        return { acted: 'none' };
      }
      const runs = deps.onMachineOffline(machineId, `the service reports machine ${machineId} offline (host:machine_offline)`);
      log.info({ eventId, machineId, runs }, `webhook: machine ${machineId} is offline; ${runs.length} run(s) fail over`);
      return { acted: 'failover', machine_id: machineId, runs };
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
