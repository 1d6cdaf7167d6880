// Drives the run machine with stub actors and fake time. The stubs behave like the real actors
// where it matters for the tests: the create stub is journaled by (run, attempt), so a create
// re-invoked after a restore returns the instance it already made instead of making another.
// Like the real actors, their rejections reach the machine through the daemon's wrapper (with the
// policy's verdict and the time), and their outputs carry the time the machine then uses.
import { createActor, fromPromise, type Snapshot } from 'xstate';
import { vi } from 'vitest';
import {
  runMachine,
  type AffordInput,
  type BootDeadlineInput,
  type BootDeadlineOutput,
  type Candidate,
  type LastLook,
  type LoginInput,
  type LoginOutput,
  type CreateInput,
  type CreateOutput,
  type CreateResult as CreateAnswer,
  type ChangeBidInput,
  type CollectInput,
  type CollectOutput,
  type DestroyInput,
  type Endpoint,
  type ProbeInput,
  type RunEmitted,
  type RunLimits,
  type SearchInput,
  type SearchOutput,
  type TaskEndInput,
  type TaskEndOutput,
} from '../../../machines/run-machine.js';
import type { InstanceStatus } from '../../../machines/run-rules.js';
import { stubActor } from '../../helpers/stub-actor.js';

export const LIMITS: RunLimits = {
  maxAttempts: 4,
  bootTimeoutS: 60,
  deadlineS: 3600,
  relaxSteps: 2,
  outageBackoffS: 5,
  destroyRetryMaxDelayS: 30,
  destroyConfirmS: 20,
  missingPollsToLose: 3,
  goneOffersPerSearch: 3,
  readyWhen: 'status',
  sshTimeoutS: 30,
  maxPricePerHour: 1,
  bid: null,
  task: false,
  maxRestarts: 0,
};

export function offers(...ids: number[]): Candidate[] {
  return ids.map((id) => ({
    offerId: id,
    machineId: id * 10,
    dphTotal: 0.5,
    minBid: 0.2,
    diskDph: 0.05,
    gpu: { name: 'RTX 4090', count: 1 },
  }));
}

type SearchResult = Candidate[] | SearchOutput | Error;
type CreateResult = CreateAnswer | Error;

/** The fake marketplace the stubs talk to: what was asked of it, and what it answers. */
export class FakeWorld {
  searchResults: SearchResult[] = [];
  defaultSearch: SearchResult = offers(1, 2, 3, 4, 5, 6);
  createResults = new Map<number, CreateResult>(); // by offer id
  destroyFailures = 0;
  /** What the warm pool says at a destroy: a hold that keeps the instance, or nothing (it is destroyed). */
  handOver?: (input: DestroyInput) => { holdId: number; idleUntil: number } | undefined;
  searches: SearchInput[] = [];
  /** Creates that reached the service (one per journaled attempt). */
  serviceCreates: CreateInput[] = [];
  destroys: DestroyInput[] = [];
  journal = new Map<string, CreateAnswer>();
  nextInstanceId = 100;
  /** SSH probes started (one per entry into booting.probing). */
  probes: ProbeInput[] = [];
  /** What probes answer: endpoints that answer, or 'never' (the probe keeps trying until stopped). */
  probeAnswer: 'all' | 'never' | Error = 'all';
  /** Logins after a banner (one per entry into booting.loggingIn). */
  logins: LoginInput[] = [];
  /** What a login answers: its output, 'deadline' (tries until `until`, then the banner alone), or an error. */
  loginAnswer: LoginOutput | 'deadline' | Error = { ok: true };
  /** Candidates checked against the budget at each fail-over (offer ids). */
  chosen: number[][] = [];
  /** What the budget left can pay for, at a fail-over (all, unless a test says otherwise). */
  afford: (candidates: Candidate[]) => SearchOutput = (candidates) => ({ candidates });
  /** Boot deadlines reached (each then looks once more at its instance). */
  looks: BootDeadlineInput[] = [];
  /** What that last look answers; null: no list answered in time (the run judges by what it saw). */
  lookAnswer: LastLook | null = null;
  /** Bids sent with change-bid. */
  bids: ChangeBidInput[] = [];
  /** Exit codes the end markers in the instances' logs give (absent: no marker). */
  taskExits = new Map<number, number>();
  /** Log reads of task instances. */
  taskReads: TaskEndInput[] = [];
  /** Instances whose end marker says the user's onstart failed (stage=onstart). */
  taskOnstart = new Set<number>();
  /** Instances whose end marker says the workdir never arrived (stage=workdir). */
  taskWorkdir = new Set<number>();
  /** How long a log read takes (its rate token and upload), ms of fake time. */
  taskReadMs = 0;
  /** Instances whose log could not be read at all (no upload came). */
  taskUnread = new Set<number>();
  /** Outputs taken (issue #40): each collect started, how long one takes (ms of fake time), and what it answers. */
  collects: CollectInput[] = [];
  collectMs = 0;
  collectAnswer: CollectOutput | Error = { state: 'kept', files: 1, bytes: 100, detail: '', tookMs: 0 };
  /** Collects stopped by the machine before they finished (left the state). */
  collectsAborted = 0;
  /** Pending creates the test resolves by hand (for "cancel while creating"). */
  holdCreates = false;
  private held: Array<() => void> = [];

  releaseCreates(): void {
    const h = this.held;
    this.held = [];
    h.forEach((r) => r());
  }

  actors() {
    return {
      searchOffers: stubActor<SearchOutput, SearchInput>(async ({ input }) => {
        this.searches.push(input);
        const r = this.searchResults.length > 0 ? this.searchResults.shift()! : this.defaultSearch;
        if (r instanceof Error) throw r;
        return Array.isArray(r) ? { candidates: r } : r;
      }),
      affordCandidates: stubActor<SearchOutput, AffordInput>(async ({ input }) => {
        this.chosen.push(input.candidates.map((c) => c.offerId));
        return this.afford(input.candidates);
      }),
      createInstance: stubActor<CreateOutput, CreateInput>(async ({ input }) => {
        const key = `${input.runId}:${input.n}`;
        const journaled = this.journal.get(key);
        if (journaled) return { ...journaled, at: Date.now() };
        if (this.holdCreates) await new Promise<void>((r) => this.held.push(r));
        const again = this.journal.get(key);
        if (again) return { ...again, at: Date.now() };
        this.serviceCreates.push(input);
        const scripted = this.createResults.get(input.offerId);
        if (scripted instanceof Error) throw scripted;
        const out: CreateAnswer = scripted ?? { kind: 'created', instanceId: this.nextInstanceId++, createdAt: Date.now() };
        this.journal.set(key, out);
        return { ...out, at: Date.now() };
      }),
      destroyInstance: stubActor<{ requestedAt: number; handed?: { holdId: number; idleUntil: number } }, DestroyInput>(
        async ({ input }) => {
          this.destroys.push(input);
          if (this.destroyFailures > 0) {
            this.destroyFailures--;
            throw Object.assign(new Error('destroy failed: 503'), { code: 'server_error' });
          }
          // The daemon's warm pool kept it instead (issue #51).
          const handed = this.handOver?.(input);
          return handed ? { requestedAt: Date.now(), handed } : { requestedAt: Date.now() };
        },
      ),
      probeSsh: stubActor<{ reachable: Endpoint[] }, ProbeInput>(async ({ input, signal }) => {
        this.probes.push(input);
        const answer = this.probeAnswer;
        if (answer instanceof Error) throw answer;
        if (answer === 'never')
          await new Promise<void>((_, reject) => signal.addEventListener('abort', () => reject(new Error('stopped'))));
        return { reachable: input.endpoints };
      }),
      loginSsh: stubActor<LoginOutput, LoginInput>(async ({ input, signal }) => {
        this.logins.push(input);
        const answer = this.loginAnswer;
        if (answer instanceof Error) throw answer;
        if (answer !== 'deadline') return answer;
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, Math.max(0, input.until - Date.now()));
          signal.addEventListener('abort', () => {
            clearTimeout(t);
            reject(new Error('stopped'));
          });
        });
        return { ok: false, code: 'ssh_auth_refused', why: "the instance refused berth's key (no login by the SSH deadline)" };
      }),
      readTaskEnd: stubActor<TaskEndOutput, TaskEndInput>(async ({ input }) => {
        this.taskReads.push(input);
        if (this.taskReadMs > 0) await new Promise((r) => setTimeout(r, this.taskReadMs));
        if (this.taskUnread.has(input.instanceId)) return { exitCode: null, unread: true, at: Date.now() };
        const exitCode = this.taskExits.get(input.instanceId) ?? null;
        const workdir = this.taskWorkdir.has(input.instanceId) ? { workdir: true } : {};
        return { exitCode, onstart: this.taskOnstart.has(input.instanceId), ...workdir, at: Date.now() };
      }),
      collectOutputs: stubActor<CollectOutput, CollectInput>(async ({ input, signal }) => {
        this.collects.push(input);
        if (this.collectMs > 0)
          await new Promise<void>((resolve, reject) => {
            const t = setTimeout(resolve, this.collectMs);
            signal.addEventListener('abort', () => {
              clearTimeout(t);
              this.collectsAborted++;
              reject(new Error('stopped'));
            });
          });
        if (this.collectAnswer instanceof Error) throw this.collectAnswer;
        return this.collectAnswer;
      }),
      changeBid: stubActor<void, ChangeBidInput>(async ({ input }) => {
        this.bids.push(input);
      }),
      bootDeadline: fromPromise<BootDeadlineOutput, BootDeadlineInput>(
        ({ input, signal }) =>
          new Promise<BootDeadlineOutput>((resolve) => {
            const t = setTimeout(
              () => {
                this.looks.push(input);
                resolve({ at: Date.now(), look: this.lookAnswer });
              },
              Math.max(0, input.until - Date.now()),
            );
            signal.addEventListener('abort', () => clearTimeout(t));
          }),
      ),
      sleepUntil: fromPromise<{ at: number }, { until: number }>(
        ({ input, signal }) =>
          new Promise<{ at: number }>((resolve) => {
            const t = setTimeout(() => resolve({ at: Date.now() }), Math.max(0, input.until - Date.now()));
            signal.addEventListener('abort', () => clearTimeout(t));
          }),
      ),
    };
  }
}

export function status(id: number, actual: string | null, extra: Partial<InstanceStatus> = {}): InstanceStatus {
  return {
    id,
    actual_status: actual,
    intended_status: 'running',
    ssh_host: 'ssh1.example',
    ssh_port: 40022,
    public_ipaddr: '203.0.113.7',
    ports: actual === 'running' ? { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: '41022' }] } : null,
    ...extra,
  };
}

export function startRun(world: FakeWorld, opts: { limits?: Partial<RunLimits>; snapshot?: Snapshot<unknown> } = {}) {
  const machine = runMachine.provide({ actors: world.actors() });
  const emitted: RunEmitted[] = [];
  const actor = createActor(machine, {
    input: { runId: 'r1', limits: { ...LIMITS, ...opts.limits }, submittedAt: Date.now() },
    ...(opts.snapshot ? { snapshot: opts.snapshot as never } : {}),
  });
  actor.on('*', (e) => emitted.push(e as RunEmitted));
  actor.start();
  return { actor, emitted };
}

export type RunActor = ReturnType<typeof startRun>['actor'];

export function stateOf(actor: RunActor): string {
  const v = actor.getSnapshot().value;
  return typeof v === 'string' ? v : Object.keys(v)[0]!;
}

/** Lets promise actors settle and timers up to `ms` fire. */
export async function tick(ms = 0): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
}

/** Sends what a poll taken now would show for the current instance. */
export async function poll(actor: RunActor, instance: InstanceStatus | null): Promise<void> {
  await tick(1);
  actor.send({ type: 'POLL', instance, listedAt: Date.now() });
  await tick(0);
}

export function currentInstanceId(actor: RunActor): number {
  const id = actor.getSnapshot().context.current?.instanceId;
  if (id == null) throw new Error(`no current instance in state ${JSON.stringify(actor.getSnapshot().value)}`);
  return id;
}

/** Drives the current attempt's destroy to confirmation (the list no longer shows the instance). */
export async function confirmGone(actor: RunActor): Promise<void> {
  await tick(0);
  await poll(actor, null);
}

/** The attempts that ended, as the run reported them (the daemon writes these to its attempts table). */
export function endedAttempts(emitted: RunEmitted[]) {
  return emitted.flatMap((e) => (e.type === 'attempt.ended' ? [e] : []));
}
