// One instance, by id: read it, change it (state, label, bid), ask for its log, destroy it (in bulk
// with others when many wait: ./bulk-destroy.ts). Reads, changes and destroys are idempotent, so
// each is retried on transient faults; an instance the service no longer knows is an answer (null,
// 'gone'), not a failure.
import { ServiceHttpError } from '../errors.js';
import { batchedDestroy, type DestroyOutcome } from './bulk-destroy.js';
import { isGone, type ServiceCaller } from './service-call.js';
import { ItemReport, oneInstance } from './record-items.js';
import { parseBody, requestLogsResponseSchema, showResponseSchema } from './records.js';
import type { Instance, MarketplaceClient } from './types.js';

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

export function instanceCalls(
  caller: ServiceCaller,
): Pick<MarketplaceClient, 'showInstance' | 'destroyInstance' | 'setInstanceState' | 'setInstanceLabel' | 'changeBid' | 'requestLogs'> {
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
