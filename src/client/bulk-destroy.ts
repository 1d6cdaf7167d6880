// Destroys batched into the official client's bulk destroy when many wait (issue #39).
//
// One destroy a call, at the `destroy` group's rate (destroy_instance.yaml: 3.0 a second), makes the
// 100th of 100 tasks ending together wait ~43 s. The official client destroys a list in one call:
// vast-cli `vastai/api/instances.py` `destroy_instance(client, id)` sends `DELETE /instances/` with
// `{"instance_ids": [...]}` when `id` is a list, and `vastai/cli/commands/instances.py`
// `destroy__instances` sends at most 64 ids a call (`split_list(args.ids, 64)`) and reads `success`;
// the docs' rate-limits page says "Batch requests where supported, rather than calling many
// single-item endpoints" (api-reference/rate-limits-and-errors.mdx). The endpoint has no yaml: no
// documented limit (its group `destroy_bulk` defaults to 0.9 a second, under the lowest documented
// threshold, 1.0) and no documented answer beyond the CLI's reading of `success`.
//
// A destroy whose `destroy` group would make it wait joins the batch being formed instead; the batch
// waits for a `destroy_bulk` token and then sends every id that joined meanwhile (its body is fixed
// then, not when it was scheduled). A 2xx with `success` true destroyed them all. A bulk call that
// fails for good sends each of its ids through the one-by-one destroy, which knows what an instance
// already gone answers. An id the service silently skipped is caught by the run machine, which counts
// a destroy only once the list no longer shows the instance and destroys again otherwise (machines/
// run-instance-states.ts, `destroyingState`: `confirming` → `waiting` → `requesting`).
import { BerthError, ServiceHttpError } from '../errors.js';
import { abortedError } from './abort.js';
import type { ServiceCaller } from './service-call.js';

export type DestroyOutcome = 'destroyed' | 'gone';
type DestroyOne = (instanceId: number, signal: AbortSignal | undefined) => Promise<DestroyOutcome>;

/** vast-cli `destroy__instances`: `split_list(args.ids, 64)`. */
const MAX_IDS = 64;
/** Bulk failures in a row (where one by one then worked) that turn bulk off for the client's life. */
const FAILURES_TO_STOP = 2;

interface Member {
  id: number;
  signal: AbortSignal | undefined;
  settled: boolean;
  resolve(outcome: DestroyOutcome): void;
  reject(err: unknown): void;
}

class Batch {
  readonly members: Member[] = [];
  /** Fired when every caller left before the send: the call must not reach the service. */
  readonly abort = new AbortController();
  /** The body is fixed (sent, or about to be): callers leaving now only stop waiting. */
  sealed = false;

  join(id: number, signal: AbortSignal | undefined): Promise<DestroyOutcome> {
    return new Promise<DestroyOutcome>((resolve, reject) => {
      const onAbort = () => {
        if (!this.sealed) {
          this.members.splice(this.members.indexOf(member), 1);
          if (this.members.length === 0) this.abort.abort();
        }
        member.reject(abortedError(signal?.reason));
      };
      const member: Member = {
        id,
        signal,
        settled: false,
        resolve: (outcome) => settle(() => resolve(outcome)),
        reject: (err) => settle(() => reject(err)),
      };
      const settle = (fn: () => void) => {
        if (member.settled) return;
        member.settled = true;
        signal?.removeEventListener('abort', onAbort);
        fn();
      };
      this.members.push(member);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The ids sent: every caller still in the batch now. */
  seal(): { instance_ids: number[] } {
    this.sealed = true;
    // Every caller left while the token came: the batch's signal has fired, nothing is sent.
    if (this.members.length === 0) throw abortedError(this.abort.signal.reason);
    return { instance_ids: [...new Set(this.members.map((m) => m.id))] };
  }

  get waiting(): Member[] {
    return this.members.filter((m) => !m.settled);
  }
}

/**
 * `destroyInstance` with batching: one by one while the `destroy` group lets a call go at once (a
 * lone destroy never waits for a batch), batched when it would wait.
 */
export function batchedDestroy(caller: ServiceCaller, destroyOne: DestroyOne): DestroyOne {
  let forming: Batch | undefined;
  let failuresInRow = 0;
  let off = false;

  async function send(batch: Batch): Promise<void> {
    try {
      await caller.call({
        op: 'destroy_bulk',
        group: 'destroy_bulk',
        method: 'DELETE',
        path: '/api/v0/instances/',
        bodyAtSend: () => {
          if (forming === batch) forming = undefined;
          return batch.seal();
        },
        signal: batch.abort.signal,
      });
    } catch (err) {
      if (forming === batch) forming = undefined;
      await fallBack(batch, err);
      return;
    }
    failuresInRow = 0;
    for (const m of batch.members) m.resolve('destroyed');
  }

  /** The bulk call failed for good (or never went): each id still waited for goes one by one. */
  async function fallBack(batch: Batch, err: unknown): Promise<void> {
    const outcomes = await Promise.all(
      batch.waiting.map(async (m) => {
        try {
          const outcome = await destroyOne(m.id, m.signal);
          m.resolve(outcome);
          return outcome;
        } catch (e) {
          m.reject(e);
          return 'failed';
        }
      }),
    );
    if (!batch.sealed || batch.abort.signal.aborted) return;
    // Only a failure that one-by-one destroys then did without an instance already gone says the bulk
    // endpoint is what failed: an outage fails both, and an id already gone may fail a whole batch.
    if (!outcomes.includes('destroyed') || outcomes.includes('gone')) return;
    if (++failuresInRow < FAILURES_TO_STOP || off) return;
    off = true;
    const code = err instanceof BerthError ? err.code : 'network';
    caller.emit({ type: 'bulk_destroy_off', code, ...(err instanceof ServiceHttpError ? { status: err.status } : {}) });
  }

  return (instanceId, signal) => {
    if (off || !caller.wouldWait('destroy')) return destroyOne(instanceId, signal);
    if (signal?.aborted) return Promise.reject(abortedError(signal.reason));
    if (forming && forming.members.length < MAX_IDS) return forming.join(instanceId, signal);
    const batch = new Batch();
    forming = batch;
    const joined = batch.join(instanceId, signal);
    void send(batch);
    return joined;
  };
}
