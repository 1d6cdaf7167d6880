// GET /metrics: the daemon in Prometheus text, with prom-client, on a registry of its own (tests run
// several daemons in one process). Two kinds of figures:
// - counted as they happen: attempts by outcome, service calls by group and status, sweeps,
//   detection latency, notification POSTs (process counters: they start again at 0 on a restart,
//   which Prometheus' rate() handles);
// - read when scraped: runs by state, live instances and their $/h, total spend and notifications
//   by state from the store (they survive restarts), and the limiter's 429s, pauses and queues from
//   the client's stats.
// Names follow Prometheus' conventions: `berth_` prefix, base units (seconds, USD), `_total` on
// counters, and no run or instance ids as labels (their number grows without bound).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RunEmitted } from '../../../machines/run-machine.js';
import type { ClientEvent, ClientStats } from '../../client/events.js';
import type { Clock } from '../../clock.js';
import { RATE_GROUPS } from '../../config/schema.js';
import type { Store } from '../../store/index.js';
import { DELIVERY_STATES } from '../../wire/notify-events.js';
import { RUN_STATES } from '../../wire/run-states.js';
import type { DeliveryResult } from './notifier.js';
import { billingNow, spentUsd } from '../instances/holdings.js';

export interface MetricsDeps {
  store: Store;
  clock: Pick<Clock, 'now'>;
  clientStats(): ClientStats;
  /** Several daemons on one store: this daemon's part (see ../cluster/). */
  cluster?: () => ClusterState;
}

/** What /metrics and /healthz say of a daemon sharing its store. */
export interface ClusterState {
  daemon_id: string;
  leader: boolean;
  /** Runs whose lease this daemon holds. */
  owned_runs: number;
  /** Daemons sharing the store (their heartbeats), this one included. */
  daemons: number;
}

/** Seconds: from a local list's round trip to an SSH probe's few seconds. */
const DETECTION_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300];
const CALL_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const SWEEP_BUCKETS = [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600];
/** Seconds: a task runs from a minute to days. */
const TASK_BUCKETS = [10, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 72 * 3600];

export class DaemonMetrics {
  readonly registry = new Registry();
  private readonly attempts: Counter<'outcome'>;
  private readonly calls: Counter<'group' | 'status'>;
  private readonly callSeconds: Histogram<'group'>;
  private readonly sweepSeconds: Histogram;
  private readonly sweepPages: Gauge;
  private readonly detection: Histogram<'via'>;
  private readonly taskSeconds: Histogram<'result'>;
  private readonly store: Store;
  private readonly posts: Counter<'result'>;
  private readonly malformed: Counter<'group' | 'outcome'>;

  constructor(deps: MetricsDeps) {
    const registers = [this.registry];
    const { store, clock } = deps;
    this.store = store;
    collectDefaultMetrics({ register: this.registry });

    new Gauge({
      name: 'berth_runs',
      help: 'Runs in the store by state (ended runs until store.retention_days deletes them).',
      labelNames: ['state'],
      registers,
      collect() {
        this.reset();
        for (const state of RUN_STATES) this.set({ state }, 0);
        for (const { state, n } of store.runsByState()) this.set({ state }, n);
      },
    });
    this.attempts = new Counter({
      name: 'berth_attempts_total',
      help: 'Attempts (offers tried) that ended, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.detection = new Histogram({
      name: 'berth_detection_seconds',
      help: "From the start of the instance list that first showed a run's instance running to the run being stored running (via: status, ssh, callback readiness).",
      labelNames: ['via'],
      buckets: DETECTION_BUCKETS,
      registers,
    });

    this.taskSeconds = new Histogram({
      name: 'berth_task_duration_seconds',
      help: "Tasks that ended, by result (succeeded: exit 0; failed: any other exit code): from the list that first showed the task's instance running to the daemon recording its end (the onstart and the detection, at most a poll interval and a log read, included).",
      labelNames: ['result'],
      buckets: TASK_BUCKETS,
      registers,
    });

    this.calls = new Counter({
      name: 'berth_service_requests_total',
      help: 'HTTP requests to the marketplace by endpoint group and status ("error": no answer).',
      labelNames: ['group', 'status'],
      registers,
    });
    this.callSeconds = new Histogram({
      name: 'berth_service_request_duration_seconds',
      help: 'Time on the wire of one marketplace request (the wait for a rate token excluded).',
      labelNames: ['group'],
      buckets: CALL_BUCKETS,
      registers,
    });
    this.malformed = new Counter({
      name: 'berth_service_malformed_records_total',
      help: 'Records in marketplace answers berth could not read, by endpoint group: dropped (left out, the rest of the answer used) or repaired (an instance record kept with its unreadable fields set to null).',
      labelNames: ['group', 'outcome'],
      registers,
    });
    // The limiter's own counts, read from its stats when scraped (they only grow while the process lives).
    const fromStats = (name: string, help: string, pick: (g: ClientStats['groups'][keyof ClientStats['groups']]) => number) =>
      new Counter({
        name,
        help,
        labelNames: ['group'],
        registers,
        collect() {
          const groups = deps.clientStats().groups;
          this.reset();
          for (const group of RATE_GROUPS) this.inc({ group }, pick(groups[group]));
        },
      });
    fromStats('berth_service_rate_limited_total', '429 answers from the marketplace by endpoint group.', (g) => g.rateLimited);
    fromStats('berth_service_pauses_total', 'Pauses of an endpoint group after a 429.', (g) => g.pauses);
    fromStats('berth_service_paused_seconds_total', 'Time endpoint groups spent paused after 429s.', (g) => g.pausedMs / 1000);
    new Gauge({
      name: 'berth_limiter_queue_depth',
      help: 'Calls waiting for a rate token or a slot, by endpoint group.',
      labelNames: ['group'],
      registers,
      collect() {
        const groups = deps.clientStats().groups;
        for (const group of RATE_GROUPS) this.set({ group }, groups[group].queued);
      },
    });
    new Gauge({
      name: 'berth_limiter_paused',
      help: '1 while an endpoint group is paused after a 429.',
      labelNames: ['group'],
      registers,
      collect() {
        const groups = deps.clientStats().groups;
        for (const group of RATE_GROUPS) this.set({ group }, groups[group].paused ? 1 : 0);
      },
    });

    this.sweepSeconds = new Histogram({
      name: 'berth_list_sweep_duration_seconds',
      help: "Time of one complete sweep of the account's instance list, page by page.",
      buckets: SWEEP_BUCKETS,
      registers,
    });
    this.sweepPages = new Gauge({
      name: 'berth_list_sweep_pages',
      help: 'Pages of the last complete sweep of the instance list (25 instances each).',
      registers,
    });

    const { cluster } = deps;
    if (cluster) {
      new Gauge({
        name: 'berth_cluster_daemons',
        help: "Daemons sharing this store and the account's rate limits, this one included.",
        registers,
        collect() {
          this.set(cluster().daemons);
        },
      });
      new Gauge({
        name: 'berth_cluster_leader',
        help: '1 while this daemon does the account-wide duties (sweep reconcile, credit, notifications), else 0.',
        registers,
        collect() {
          this.set(cluster().leader ? 1 : 0);
        },
      });
      new Gauge({
        name: 'berth_cluster_owned_runs',
        help: 'Live runs whose lease this daemon holds (it drives them).',
        registers,
        collect() {
          this.set(cluster().owned_runs);
        },
      });
    }
    new Gauge({
      name: 'berth_live_instances',
      help: 'Instances berth made that are not confirmed destroyed (each may be billing).',
      registers,
      collect() {
        this.set(billingNow(store, clock.now()).n);
      },
    });
    new Gauge({
      name: 'berth_live_instances_usd_per_hour',
      help: 'What those instances are billed, summed, USD per hour (disk included).',
      registers,
      collect() {
        this.set(billingNow(store, clock.now()).usdPerHour);
      },
    });
    new Counter({
      name: 'berth_spend_usd_total',
      help: "What berth's instances have cost since the store was made, USD: billed $/h × the time each existed (create sent to destroy confirmed).",
      registers,
      collect() {
        this.reset();
        this.inc(spentUsd(store, clock.now()));
      },
    });

    new Gauge({
      name: 'berth_notifications',
      help: 'Notification deliveries in the outbox by state (delivered and dead ones until store.retention_days).',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = store.outbox.counts();
        for (const state of DELIVERY_STATES) this.set({ state }, counts[state]);
      },
    });
    this.posts = new Counter({
      name: 'berth_notification_posts_total',
      help: 'Notification POSTs by result (failed: retried later; dead: the last).',
      labelNames: ['result'],
      registers,
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition text. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /** A run's transition committed (./run-hooks.ts). */
  runCommitted(runId: string, events: readonly RunEmitted[], at: number, detectionMs: number | undefined): void {
    for (const e of events) {
      if (e.type === 'attempt.ended') this.attempts.inc({ outcome: e.outcome });
      if (e.type === 'task.ended') {
        const ranFrom = this.store.attempts.get(runId, e.n)?.first_running_at;
        if (ranFrom != null)
          this.taskSeconds.observe({ result: e.exitCode === 0 ? 'succeeded' : 'failed' }, Math.max(0, at - ranFrom) / 1000);
      }
      if (e.type === 'attempt.running' && detectionMs !== undefined) this.detection.observe({ via: e.via }, detectionMs / 1000);
    }
  }

  clientEvent(e: ClientEvent): void {
    if (e.type === 'malformed_records') {
      if (e.dropped > 0) this.malformed.inc({ group: e.group, outcome: 'dropped' }, e.dropped);
      if (e.repaired > 0) this.malformed.inc({ group: e.group, outcome: 'repaired' }, e.repaired);
      return;
    }
    if (e.type !== 'response') return;
    this.calls.inc({ group: e.group, status: e.status === null ? 'error' : String(e.status) });
    this.callSeconds.observe({ group: e.group }, e.ms / 1000);
  }

  sweepDone(sweep: { pages: number; durationMs: number }): void {
    this.sweepSeconds.observe(sweep.durationMs / 1000);
    this.sweepPages.set(sweep.pages);
  }

  notificationPosted(result: DeliveryResult): void {
    this.posts.inc({ result });
  }
}
