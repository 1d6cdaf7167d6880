// A task's outputs copied by the service to one of the account's cloud connections (issue #40 item
// 4): the run machine's `collectOutputs` actor when the spec's `outputs` has `cloud`. The instance is
// stopped first, so its GPU stops billing while the copy runs (its disk bills on), then the copy is
// started, its end waited for in the instance's status bar, and the machine destroys the instance.
//
//   stopping    the instance stopped (skipped when its task stopped it): "When an instance is stopped
//               all of your data on the instance is preserved" (vast-ai/docs cli/reference/stop-instance.mdx);
//               a stopped instance is billed for its disk only (guides/instances/pricing: billing.mdx);
//   resolving   the connection named by the spec, by id or name, among the account's
//               (GET /users/cloud_integrations/); none: failed, saying which there are;
//   copying     the copy sent (POST /commands/rclone/, Instance To Cloud), which works on a stopped
//               instance ("copy data to/from a stopped instance", guides/instances/storage/data-movement.mdx),
//               then the status bar read on each look at the instance until it says the copy finished
//               or failed (src/client/cloud-copy-status.ts). A "Finished" may be an earlier copy's,
//               left in the bar: it is trusted only after a line that was not one was seen since this
//               copy started, or once the bar's documented ~30 s delay has passed (vast.py cloud__copy);
//   copied / failed   the run_outputs row says so, with the destination.
// Bounded by the machine: its deadline (files.outputs_timeout_s), a limit or a cancel aborts the
// signal, and the row is left `failed` (cut) with what was known; the destroy follows at once.
import type { CollectInput, CollectOutput } from '../../../machines/run-machine.js';
import type { Clock } from '../../clock.js';
import { BerthError, toRunError } from '../../errors.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import type { Store } from '../../store/index.js';

/** How late the status bar shows a copy's lines, ms (vast.py cloud__copy: "~30 seconds delayed"). */
const STATUS_DELAY_MS = 30_000;

/** The account's cloud connections (FILES-DESIGN: GET /api/v0/users/cloud_integrations/). */
interface CloudConnectionRef {
  id: number;
  name: string;
}

/** The calls the cloud copy needs of the service's client, and the end phrases of its status bar. */
export interface CloudCopyPort {
  setInstanceState(instanceId: number, state: 'stopped', options: { signal: AbortSignal }): Promise<void>;
  listCloudConnections(options: { signal: AbortSignal }): Promise<CloudConnectionRef[]>;
  startCloudCopy(
    request: { instanceId: number; src: string; dst: string; connectionId: number; transfer: 'Instance To Cloud' },
    options: { signal: AbortSignal },
  ): Promise<void>;
  /** The instance's status bar as one list shows it now (undefined: no list answered; null: not listed). */
  statusMsg(instanceId: number, signal: AbortSignal): Promise<string | null | undefined>;
  finished(statusMsg: string | null | undefined): boolean;
  failed(statusMsg: string | null | undefined): boolean;
}

export interface OutputsCloudDeps {
  store: Pick<Store, 'outputs' | 'transaction'>;
  clock: Clock;
  specs: RunSpecs;
  cloud: CloudCopyPort;
  /** Whether this daemon still holds the run: asked before the stop (several daemons on one store). */
  ownership: { check(runId: string): void };
  /** Time between two looks at the status bar, ms (polling.interval_s). */
  lookEveryMs: number;
  host: string;
}

export class OutputsCloud {
  constructor(private readonly deps: OutputsCloudDeps) {}

  async collect(input: CollectInput, signal: AbortSignal): Promise<CollectOutput> {
    const { store, clock, cloud } = this.deps;
    const plan = this.deps.specs.get(input.runId)?.collect;
    const target = plan?.cloud;
    const src = plan?.paths[0];
    if (!target || src === undefined) throw new BerthError('bad_request', `run ${input.runId} has no cloud destination for its outputs`);
    const startedAt = clock.now();
    let where = `connection ${JSON.stringify(target.connection)}, ${target.path}`;
    const end = (state: 'copied' | 'failed', detail: string): CollectOutput => {
      const at = clock.now();
      store.transaction(() => store.outputs.finish({ runId: input.runId, attempt: input.n, state, files: [], detail, at }));
      return { state, files: 0, bytes: 0, detail, tookMs: at - startedAt };
    };
    // The intent first: a daemon killed after this resumes `collecting`, which stops (again: a
    // stop is idempotent) and copies again (rclone's copy skips what is already there), or destroys.
    store.transaction(() =>
      store.outputs.begin({
        runId: input.runId,
        attempt: input.n,
        state: 'copying',
        host: this.deps.host,
        dir: null,
        detail: where,
        at: startedAt,
      }),
    );
    try {
      if (!input.stopped) {
        this.deps.ownership.check(input.runId);
        await cloud.setInstanceState(input.instanceId, 'stopped', { signal });
      }
      const connections = await cloud.listCloudConnections({ signal });
      const conn = connections.find((c) => c.id === Number(target.connection) || c.name === String(target.connection));
      if (!conn) {
        const known = connections.map((c) => `${c.name} (id ${c.id})`).join(', ') || 'none';
        return end('failed', `no cloud connection ${JSON.stringify(target.connection)} on the account (it has: ${known})`);
      }
      where = `${conn.name} (id ${conn.id}): ${target.path}`;
      const sentAt = clock.now();
      await cloud.startCloudCopy(
        { instanceId: input.instanceId, src, dst: target.path, connectionId: conn.id, transfer: 'Instance To Cloud' },
        { signal },
      );
      let sawOther = false;
      for (;;) {
        await clock.sleepUntil(clock.now() + this.deps.lookEveryMs, signal);
        const msg = await cloud.statusMsg(input.instanceId, signal);
        if (msg === null) return end('failed', `the instance left the list before the copy to ${where} finished`);
        if (msg === undefined) continue;
        const trusted = sawOther || clock.now() - sentAt >= STATUS_DELAY_MS;
        if (cloud.finished(msg)) {
          if (trusted) return end('copied', where);
          continue;
        }
        if (cloud.failed(msg)) {
          if (trusted) return end('failed', `the copy to ${where} failed: ${msg}`);
          continue;
        }
        sawOther = true;
      }
    } catch (err) {
      const why = signal.aborted ? 'stopped before it finished (see the run events)' : toRunError(err).message;
      const out = end('failed', `copy to ${where}: ${why}`);
      if (signal.aborted) throw err;
      return out;
    }
  }
}
