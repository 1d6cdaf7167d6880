// What the two task benches (measure-tasks.ts, measure-tasks-ssh.ts) do alike: N runs with a task
// submitted to a real daemon, its runs listed, and waits until every run is running or has ended.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Run as RunView } from '../src/wire/control-api.js';
import type { DaemonHandle } from './measure-daemon.js';

/** A run whose task is `run`, on the cheapest offer of a GPU, with a deadline of `timeoutMs`. */
export function taskSpec(i: number, run: string, timeoutMs: number) {
  return {
    name: `task-${i}`,
    image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
    disk_gb: 20,
    search: { filters: { num_gpus: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 64 },
    max_price_per_hour: 5,
    ready_when: 'status',
    boot_timeout_s: 60,
    deadline_s: Math.ceil(timeoutMs / 1000),
    run,
  };
}

const isEnded = (v: RunView): boolean => ['succeeded', 'failed', 'cancelled', 'expired'].includes(v.state);

/** The runs of `daemon`, submitted and watched until each is running or has ended. */
export class TaskFleet {
  readonly ids: string[] = [];
  private readonly t0 = Date.now();

  constructor(
    private readonly daemon: DaemonHandle,
    private readonly timeoutMs: number,
  ) {}

  /** Submits `n` runs, spec(i) each. */
  async submit(n: number, spec: (i: number) => object): Promise<void> {
    for (let i = 0; i < n; i++) {
      const res = await this.daemon.api<RunView>('POST', '/v1/runs', spec(i));
      if (res.status !== 201) throw new Error(`submit answered ${res.status}: ${JSON.stringify(res.body)}`);
      this.ids.push(res.body.id);
    }
  }

  /**
   * Every run, read again when a kept-alive connection was reset or closed under it (a machine
   * under load misses the keep-alive's timing): the runs' list is read, nothing is changed.
   */
  async all(): Promise<RunView[]> {
    for (let i = 0; ; i++) {
      try {
        return (await this.daemon.api<RunView[]>('GET', '/v1/runs?limit=10000')).body;
      } catch (err) {
        if (i >= 5 || !['ECONNRESET', 'UND_ERR_SOCKET'].includes((err as { code?: string }).code ?? '')) throw err;
        await sleep(250);
      }
    }
  }

  /** Waits until every run is `running` or has ended. */
  async allRunning(): Promise<void> {
    await this.until((v) => v.state === 'running' || isEnded(v), 'was running');
  }

  /** Waits until every run has ended; returns them as they ended. */
  allEnded(): Promise<RunView[]> {
    return this.until(isEnded, 'had ended');
  }

  /** Fails once the bench's time since its first submit is over. */
  checkTime(what: string): void {
    if (Date.now() - this.t0 > this.timeoutMs) throw new Error(`${what} after ${this.timeoutMs} ms`);
  }

  private async until(done: (v: RunView) => boolean, what: string): Promise<RunView[]> {
    for (;;) {
      const views = await this.all();
      if (views.every(done)) return views;
      this.checkTime(`not every run ${what}`);
      await sleep(250);
    }
  }
}
