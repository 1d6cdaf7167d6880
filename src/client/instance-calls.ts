// One instance, by id: read it, change it (state, label, bid), recycle or update its container, ask
// for its log, destroy it (in bulk
// with others when many wait: ./bulk-destroy.ts). Reads, changes and destroys are idempotent, so
// each is retried on transient faults; an instance the service no longer knows is an answer (null,
// 'gone'), not a failure.
import { NotFoundError, ServiceHttpError } from '../errors.js';
import { batchedDestroy, type DestroyOutcome } from './bulk-destroy.js';
import { isGone, type ServiceCaller } from './service-call.js';
import { ItemReport, oneInstance } from './record-items.js';
import { parseBody, requestLogsResponseSchema, showResponseSchema } from './records.js';
import type { Instance, MarketplaceClient, UpdateInstanceRequest } from './types.js';

/**
 * destroy_instance.yaml documents two answers for an instance it will not destroy, 404 `not_found`
 * "Instance not found" and 400 `invalid_args` "invalid instance_id", without saying which one an
 * instance already destroyed (by its own task, by the service, by an earlier call whose answer was
 * lost) gets. Read as a refusal, that 400 would have a run send its destroy again forever and never
 * end; so it sends berth to look at the instance itself.
 */
function mayBeGone(err: unknown): boolean {
  return err instanceof ServiceHttpError && err.status === 400 && err.serviceCode === 'invalid_args';
}

/**
 * A recycle refused because the service has no such instance or container: recycle_instance.yaml
 * documents 400 `{error: "invalid_id", msg: "Invalid instance id."}`, the spec generated from the
 * server's code (vast-ai/docs branch auto/openapi-preview-pr-5363) answers the same body with a 200.
 * Either is "not found"; update_template's 404 `not_found` (the preview) already is.
 */
function notFoundIfInvalidId(err: unknown, what: string): unknown {
  if (!(err instanceof ServiceHttpError) || err instanceof NotFoundError || err.serviceCode !== 'invalid_id') return err;
  return new NotFoundError(`${what}: the marketplace has no such instance (${err.status} invalid_id).`, err.status, err.serviceCode);
}

/** The update_template body: the official client's `{id, ...}` (vast-cli `update_instance`), only the fields given. */
function updateBody(instanceId: number, r: UpdateInstanceRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { id: instanceId };
  for (const field of ['image', 'onstart', 'env', 'args', 'disk', 'recycle'] as const) if (r[field] !== undefined) body[field] = r[field];
  return body;
}

export function instanceCalls(
  caller: ServiceCaller,
): Pick<
  MarketplaceClient,
  | 'showInstance'
  | 'destroyInstance'
  | 'setInstanceState'
  | 'setInstanceLabel'
  | 'changeBid'
  | 'recycleInstance'
  | 'updateInstance'
  | 'requestLogs'
> {
  const { call, reportItems } = caller;
  async function showInstance(instanceId: number, signal: AbortSignal | undefined): Promise<Instance | null> {
    const path = `/api/v0/instances/${instanceId}/`;
    try {
      const res = await call({ op: 'show', group: 'show', method: 'GET', path, signal });
      const { instances } = parseBody(showResponseSchema, res.body, `GET ${path}`);
      const report = new ItemReport();
      try {
        return oneInstance(instances, `GET ${path}`, report);
      } finally {
        reportItems('show', 'show', report);
      }
    } catch (err) {
      if (isGone(err, 'no_such_instance')) return null;
      throw err;
    }
  }

  /** One instance destroyed by its own call. Idempotent: retried on transient faults, and "already gone" is success. */
  async function destroyOne(instanceId: number, signal: AbortSignal | undefined): Promise<DestroyOutcome> {
    try {
      await call({ op: 'destroy', group: 'destroy', method: 'DELETE', path: `/api/v0/instances/${instanceId}/`, signal });
      return 'destroyed';
    } catch (err) {
      if (isGone(err, 'no_such_instance')) return 'gone';
      // The service's own answer decides: `{"instances": null}` is "no such instance" (vast-cli
      // `vastai/api/instances.py`, show_instance); a record shown means the 400 was a refusal.
      if (mayBeGone(err) && (await showInstance(instanceId, signal)) === null) return 'gone';
      throw err;
    }
  }
  // Many destroys waiting at once go in bulk calls (./bulk-destroy.ts).
  const destroy = batchedDestroy(caller, destroyOne);

  return {
    showInstance: (instanceId, opts) => showInstance(instanceId, opts?.signal),

    destroyInstance: (instanceId, opts) => destroy(instanceId, opts?.signal),

    async setInstanceState(instanceId, state, opts) {
      await call({
        op: 'change',
        group: 'change',
        method: 'PUT',
        path: `/api/v0/instances/${instanceId}/`,
        body: { state },
        signal: opts?.signal,
      });
    },

    async setInstanceLabel(instanceId, label, opts) {
      await call({
        op: 'change',
        group: 'change',
        method: 'PUT',
        path: `/api/v0/instances/${instanceId}/`,
        body: { label },
        signal: opts?.signal,
      });
    },

    async changeBid(instanceId, price, opts) {
      // change_bid.yaml: {client_id: "me", price} in $/h, 0.001-32 per GPU, its own endpoint and
      // limit (5.5/s). Idempotent: retried on faults.
      await call({
        op: 'change_bid',
        group: 'bid',
        method: 'PUT',
        path: `/api/v0/instances/bid_price/${instanceId}/`,
        body: { client_id: 'me', price },
        signal: opts?.signal,
      });
    },

    async recycleInstance(instanceId, opts) {
      // recycle_instance.yaml: no body documented; the official client sends `{}` (vast-cli
      // `recycle_instance`). Its own endpoint and limit (1.0). Retried on transient faults only: a
      // recycle sent twice still ends in one fresh container. A 200 `success: false` fails it.
      const path = `/api/v0/instances/recycle/${instanceId}/`;
      try {
        await call({ op: 'recycle', group: 'recycle', method: 'PUT', path, body: {}, signal: opts?.signal });
      } catch (err) {
        throw notFoundIfInvalidId(err, `PUT ${path}`);
      }
    },

    async updateInstance(instanceId, request, opts) {
      // The preview spec's update_template (x-rateLimit 2: seconds between calls) with the official
      // client's body. Retried on transient faults like the other changes: the same update twice
      // sets the same template (with `recycle`, one fresh container still comes of it).
      const path = `/api/v0/instances/update_template/${instanceId}/`;
      try {
        await call({
          op: 'update_template',
          group: 'update',
          method: 'PUT',
          path,
          body: updateBody(instanceId, request),
          secrets: [...Object.values(request.env ?? {}), ...(request.secrets ?? [])],
          signal: opts?.signal,
        });
      } catch (err) {
        throw notFoundIfInvalidId(err, `PUT ${path}`);
      }
    },

    async requestLogs(instanceId, request, opts) {
      // logs.yaml: `tail` is a string of digits, `filter` a grep pattern the host applies (its
      // answer is only the matching lines); the answer names where the log will be uploaded.
      const body = {
        ...(request.tail === undefined ? {} : { tail: String(request.tail) }),
        ...(request.filter === undefined ? {} : { filter: request.filter }),
      };
      const path = `/api/v0/instances/request_logs/${instanceId}`;
      const res = await call({
        op: 'request_logs',
        group: 'other',
        method: 'PUT',
        path,
        body,
        signal: opts?.signal,
        background: opts?.background,
      });
      return { resultUrl: parseBody(requestLogsResponseSchema, res.body, `PUT ${path}`).result_url };
    },
  };
}
