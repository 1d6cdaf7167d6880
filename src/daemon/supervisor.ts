// Keeps one RunDriver per live run: resumes them at start, admits queued runs while fewer than
// `daemon.max_active_runs` are active, hands each its instance from the shared poll, and destroys
// instances that carry this store's label but have no live owner.
//
// States of a run here: queued (driver idle, waiting for a slot) → active (admitted) → ended (driver
// dropped). A run is never dropped while it holds an instance: the machine ends only after its
// destroy was confirmed.
import { randomBytes } from 'node:crypto';
import type { Instance, MarketClient } from '../client/types.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config/schema.js';
import { BerthError, describeError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { ResolvedJobSpec } from '../job-spec/schema.js';
import { parseJobSpec, resolveJobSpec } from '../job-spec/validate.js';
import type { RunRow, Store } from '../store/index.js';
import { MachineQuarantine } from './machine-quarantine.js';
import { OfferClaims } from './offer-claims.js';
import { classifyInstance } from './ownership.js';
import type { InstanceLists } from './poller.js';
import { provideRunMachine, RunDriver, type ProvidedRunMachine } from './run-driver.js';

export interface SupervisorDeps {
  store: Store;
  client: MarketClient;
  clock: Clock;
  lists: InstanceLists;
  config: Config;
  log: Logger;
}

function newRunId(): string {
  // 12 characters of base32: short enough for labels and typing, 60 bits of randomness.
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const bytes = randomBytes(12);
  let id = '';
  for (const b of bytes) id += alphabet[b & 31];
  return id;
}

export class Supervisor {
  private readonly drivers = new Map<string, RunDriver>();
  /** Runs waiting for a slot, oldest first (a Set keeps insertion order). */
  private readonly queued = new Set<string>();
  /** Orphans whose destroy was sent, with the time, so each poll does not send it again at once. */
  private readonly orphanDestroys = new Map<number, number>();
  private readonly abort = new AbortController();
  private readonly claims = new OfferClaims();
  private readonly quarantine: MachineQuarantine;
  private readonly specs = new Map<string, ResolvedJobSpec>();
  private readonly machine: ProvidedRunMachine;
  private stopping = false;

  constructor(private readonly deps: SupervisorDeps) {
    this.quarantine = new MachineQuarantine(deps.config.runs.machine_quarantine_s * 1000);
    this.machine = provideRunMachine({
      quarantine: this.quarantine,
      client: deps.client,
      clock: deps.clock,
      store: deps.store,
      lists: deps.lists,
      claims: this.claims,
      reconcileGraceMs: Math.max(2 * deps.config.polling.interval_s * 1000, 2000),
      specOf: (runId) => {
        const spec = this.specs.get(runId);
        if (!spec) throw new Error(`no spec for run ${runId}`); // a driver exists for every live run
        return spec;
      },
    });
  }

  /** Resumes every non-ended run of the store from its snapshot. */
  resumeAll(): void {
    for (const row of this.deps.store.runs.live()) {
      if (!RunDriver.canResume(row)) {
        // A snapshot from another machine version cannot be restored safely; the run fails and the
        // orphan sweep destroys whatever it held.
        this.deps.store.runs.setState(row.id, 'failed', {
          kind: 'upgrade',
          message: `This run was saved by another version of berth (machine v${row.machine_version}) and cannot be resumed; its instances are destroyed.`,
        }, Date.now());
        continue;
      }
      this.startDriver(row);
    }
    this.admitQueued();
  }

  /** Validates and stores a job spec; with an idempotency key already used, returns that run. */
  submit(specInput: unknown, idempotencyKey?: string): { row: RunRow; created: boolean } {
    if (this.stopping) throw new BerthError('control', 'The daemon is shutting down and takes no new runs.');
    const spec = resolveJobSpec(parseJobSpec(specInput), this.deps.config.runs);
    const { store } = this.deps;
    const now = Date.now();
    const result = store.transaction(() => {
      const inserted = store.runs.insert({ id: newRunId(), name: spec.name, specJson: JSON.stringify(spec), createdAt: now, idempotencyKey });
      if (inserted.created) {
        store.events.append({ runId: inserted.row.id, at: now, type: 'submitted', message: `submitted "${spec.name}" (image ${spec.image}, max $${spec.max_price_per_hour}/h)` });
      }
      return inserted;
    });
    if (result.created) {
      this.deps.log.info({ runId: result.row.id, name: spec.name }, 'run submitted');
      this.startDriver(result.row);
      this.admitQueued();
    }
    return { row: store.runs.get(result.row.id)!, created: result.created };
  }

  /** Asks a run to stop; its instances are destroyed before it is `cancelled`. */
  cancel(runId: string): RunRow | undefined {
    this.drivers.get(runId)?.cancel();
    return this.deps.store.runs.get(runId);
  }

  /** From the store, not the drivers: the startup reconcile runs before any driver is resumed. */
  isLive(runId: string): boolean {
    const row = this.deps.store.runs.get(runId);
    return row !== undefined && row.ended_at === null;
  }

  get activeCount(): number {
    return this.drivers.size - this.queued.size;
  }

  get liveCount(): number {
    return this.drivers.size;
  }

  /** Called with every instance list: feeds each run its instance, adopts journaled creates, destroys orphans. */
  async onList(instances: Instance[], listedAt: number): Promise<void> {
    const { store, log } = this.deps;
    const byId = new Map(instances.map((inst) => [inst.id, inst]));
    // The runs first: their status is what a user waits for; the ownership sweep can come after.
    for (const driver of this.drivers.values()) {
      const id = driver.currentInstanceId();
      if (id !== null) driver.poll(toStatus(byId.get(id)), listedAt);
    }
    for (const inst of instances) {
      const owner = classifyInstance(inst, store, (id) => this.isLive(id));
      if (owner.kind === 'adopt') {
        store.attempts.markCreated(owner.runId, owner.n, inst.id);
        log.info({ runId: owner.runId, attempt: owner.n, instanceId: inst.id }, 'adopted an instance whose create was journaled');
      } else if (owner.kind === 'orphan') {
        this.destroyOrphan(inst, owner.runId, owner.reason);
      }
    }
    for (const id of this.orphanDestroys.keys()) if (!byId.has(id)) this.orphanDestroys.delete(id);
  }

  /** Stops every run's actor (in-flight calls are abandoned safely: their journal rows remain). */
  stop(): void {
    this.stopping = true;
    this.abort.abort();
    for (const d of this.drivers.values()) d.stop();
    this.drivers.clear();
  }

  private startDriver(row: RunRow): void {
    const spec = JSON.parse(row.spec_json) as ResolvedJobSpec;
    const latest = this.deps.store.attempts.latest(row.id);
    if (latest && (latest.outcome === null || latest.outcome === 'running')) this.claims.claim(latest.offer_id, row.id);
    const driver = new RunDriver(row, spec, {
      machine: this.machine,
      store: this.deps.store,
      claims: this.claims,
      quarantine: this.quarantine,
      config: this.deps.config,
      log: this.deps.log,
      onEnded: (runId) => {
        this.drivers.delete(runId);
        this.queued.delete(runId); // a queued run can be cancelled before it is admitted
        this.specs.delete(runId);
        // Admission may start other runs' actors: not from inside this run's transition.
        queueMicrotask(() => this.admitQueued());
      },
    });
    this.specs.set(row.id, spec);
    this.drivers.set(row.id, driver);
    if (row.state === 'queued') this.queued.add(row.id);
    driver.start();
  }

  private admitQueued(): void {
    if (this.stopping) return;
    const max = this.deps.config.daemon.max_active_runs;
    for (const runId of this.queued) {
      if (this.activeCount >= max) break;
      this.queued.delete(runId);
      this.drivers.get(runId)?.admit();
    }
  }

  private destroyOrphan(inst: Instance, runId: string, reason: string): void {
    const { client, store, log, config } = this.deps;
    const last = this.orphanDestroys.get(inst.id);
    const retryMs = Math.max(5 * config.polling.interval_s, 30) * 1000;
    if (last !== undefined && Date.now() - last < retryMs) return;
    this.orphanDestroys.set(inst.id, Date.now());
    log.warn({ runId, instanceId: inst.id, label: inst.label, reason }, 'destroying an instance no live run owns');
    if (store.runs.get(runId)) {
      store.events.append({ runId, at: Date.now(), type: 'orphan.destroy', message: `destroying instance ${inst.id}: ${reason}`, data: { instanceId: inst.id } });
    }
    client.destroyInstance(inst.id, { signal: this.abort.signal }).catch((err: unknown) => {
      if (this.abort.signal.aborted) return;
      // Retried on a later poll while the instance is still listed.
      log.error({ instanceId: inst.id, err: describeError(err) }, 'ALERT: destroy of an orphan instance failed; will retry');
    });
  }
}

function toStatus(inst: Instance | undefined) {
  if (!inst) return null;
  return {
    id: inst.id,
    actual_status: inst.actual_status,
    intended_status: inst.intended_status ?? null,
    cur_state: inst.cur_state ?? null,
    status_msg: inst.status_msg ?? null,
    ssh_host: inst.ssh_host ?? null,
    ssh_port: inst.ssh_port ?? null,
    dph_total: inst.dph_total ?? null,
  };
}
