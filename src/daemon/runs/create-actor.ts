// The create of one attempt, the run machine's createInstance actor: its intent journaled (and
// committed) before the call, the money gate before that, the onstart (with the readiness callback,
// or the task wrapper and its backstop), and the label look-up when the outcome is unknown. Safe to
// repeat: xstate re-runs an invoked promise that was in flight when a snapshot was taken, so the
// create first reads its journal row and, when a call may already have reached the service, looks
// for the attempt's label instead of calling again. What a failed create means (skip the offer, look
// for the label, fail the run...) is the policy table's call (src/client/retry-policy.ts RUN_POLICY).
import { createHash } from 'node:crypto';
import type { CreateInput, CreateResult } from '../../../machines/run-machine.js';
import { runPolicyOf } from '../../client/retry-policy.js';
import { toRunError } from '../../errors.js';
import { encodeOnstart, encodeOnstartWith } from '../../job-spec/onstart.js';
import { taskScript } from '../../job-spec/task-script.js';
import type { RunPlan, TaskPlan } from '../../job-spec/run-plan.js';
import type { AttemptRow } from '../../store/index.js';
import { CreateAbandoned } from '../money/create-gate.js';
import type { WarmOffer } from '../instances/warm-pool.js';
import { callbackLine } from '../inbound/ready-token.js';
import { specOf, type RunActorDeps } from './run-actor-deps.js';
import { instanceEnv, secretValues } from '../../job-spec/spec-secrets.js';

/**
 * The backstop's grace: a task's wrapper destroys its own instance this long after the run's limit
 * (max_runtime_s, or what budget_usd buys at the attempt's price) has passed, should no daemon have
 * ended it by then. Long enough that a live daemon, which ends the run within a poll interval of the
 * limit, always acts first.
 */
const BACKSTOP_GRACE_S = 600;

/** Lists the label is looked for in, spread over the grace period. */
const RECONCILE_LISTS = 3;

/**
 * Looks for the attempt's label in lists started after the create may have happened (label look-ups
 * by the shared poller, so many look-ups cost one call); adopts the instance if it is there, or
 * records that it is not.
 */
async function reconcileCreate(deps: RunActorDeps, input: CreateInput, sentAt: number, signal: AbortSignal): Promise<CreateResult> {
  const label = deps.journal.labelOf(input.runId, input.n);
  for (let i = 0; i < RECONCILE_LISTS; i++) {
    const found = await deps.lists.findLabel(label, deps.clock.now(), signal);
    if (found) return adopted(deps, input, found.id, sentAt);
    if (i < RECONCILE_LISTS - 1) await deps.clock.sleep(deps.reconcileGraceMs / (RECONCILE_LISTS - 1), signal);
  }
  const detail = `create outcome unknown and no instance labelled ${label} appeared`;
  deps.journal.notCreated(input.runId, input.n, 'failed', detail);
  return { kind: 'create_failed', detail };
}

function adopted(deps: RunActorDeps, input: CreateInput, instanceId: number, sentAt: number): CreateResult {
  if (!deps.journal.adopt(input.runId, input.n, instanceId, sentAt)) {
    // The attempt holds another instance or gave up: this one is an orphan, and the sweep destroys it.
    return { kind: 'create_failed', detail: `instance ${instanceId} surfaced after attempt #${input.n} had moved on` };
  }
  return { kind: 'created', instanceId, createdAt: deps.clock.now() };
}

/** A create an earlier process (or an earlier run of this actor) journaled: what it recorded stands. */
function journaled(deps: RunActorDeps, input: CreateInput, row: AttemptRow, signal: AbortSignal): Promise<CreateResult> | CreateResult {
  deps.claims.claim(input.offerId, input.runId);
  switch (row.create_state) {
    case 'created':
      // A warm instance taken whose update + recycle may have been sent: its record tells.
      if (row.recycle_state === 'intent') return recycleUnknown(deps, input, row, signal);
      return { kind: 'created', instanceId: row.instance_id!, createdAt: row.instance_created_at ?? row.started_at };
    case 'offer_gone':
      return { kind: 'offer_gone', detail: row.create_detail ?? 'offer gone' };
    case 'failed':
      return { kind: 'create_failed', detail: row.create_detail ?? 'create failed' };
    case 'intent':
      // The call may have been sent: look for the label, never call again.
      return reconcileCreate(deps, input, row.started_at, signal);
  }
}

export async function createAttempt(deps: RunActorDeps, input: CreateInput, signal: AbortSignal): Promise<CreateResult> {
  const { client, journal, claims } = deps;
  const spec = specOf(deps, input.runId);
  const { runId, n, offerId } = input;
  const before = journal.find(runId, n);
  if (before) return journaled(deps, input, before, signal);
  // A warm instance on this offer, of this run's reuse key: taken instead of a create (issue #51).
  const warm = deps.warm?.holdOn(offerId, spec);
  if (warm) return takeWarm(deps, spec, input, warm, signal);
  /**
   * The intent, and on a shared store the look at other runs' attempts on the offer, in one step
   * (the gate's, under the store's caps lock): of two daemons going for one offer, the second sees
   * the first's intent and moves on without a create call. `taken`: why it moved on.
   */
  const start = () => {
    const begun = journal.begin(input, deps.clock.now());
    const holder = begun.fresh ? claims.holderInStore(offerId, runId) : undefined;
    const taken = holder === undefined ? undefined : `offer ${offerId} is being tried by run ${holder}`;
    if (taken !== undefined) journal.notCreated(runId, n, 'offer_gone', taken);
    return { ...begun, taken };
  };
  let begun: ReturnType<typeof start>;
  try {
    // The money guard's gate comes before the intent: a create it holds back has sent nothing.
    begun = await deps.money.gate.admit(input, signal, start);
  } catch (err) {
    if (!(err instanceof CreateAbandoned)) throw err;
    // Recorded like any attempt that made nothing, so the run's story lists it.
    journal.begin(input, deps.clock.now());
    journal.notCreated(runId, n, 'failed', err.message);
    return { kind: 'create_failed', detail: err.message };
  }
  const { row, fresh, taken } = begun;
  if (!fresh) return journaled(deps, input, row, signal);
  if (taken !== undefined) return { kind: 'offer_gone', detail: taken };
  if (!claims.claim(offerId, runId)) {
    // Another run of this daemon is on this offer: move on without spending a create call.
    const detail = `offer ${offerId} is being tried by run ${claims.heldByOther(offerId, runId)} of this daemon`;
    journal.notCreated(runId, n, 'offer_gone', detail);
    return { kind: 'offer_gone', detail };
  }
  const sentAt = deps.clock.now();
  const onstart = onstartFor(deps, spec, input);
  const env = instanceEnv(spec);
  let instanceId: number;
  let instanceApiKey: string | undefined;
  let unsuccessful: string | undefined;
  try {
    ({ instanceId, instanceApiKey, unsuccessful } = await client.createInstance(
      offerId,
      {
        image: spec.image,
        disk: spec.disk_gb,
        label: row.label,
        ...(onstart.script ? { onstart: onstart.script } : {}),
        secrets: [...(onstart.secret ? [onstart.secret] : []), ...secretValues(spec)],
        ...(env ? { env } : {}),
        // The machine decides the attempt's bid (the spec's price, or the offer's min_bid): null on-demand.
        price: input.bidPrice,
        runtype: 'ssh_direc ssh_proxy',
      },
      { signal },
    ));
  } catch (err) {
    const detail = toRunError(err).message;
    switch (runPolicyOf(err).create) {
      case 'skip_offer':
        journal.notCreated(runId, n, 'offer_gone', detail);
        return { kind: 'offer_gone', detail };
      case 'reconcile':
        return reconcileCreate(deps, input, sentAt, signal);
      case 'end_attempt':
        journal.notCreated(runId, n, 'failed', detail);
        return { kind: 'create_failed', detail };
      case 'fail_run':
        journal.notCreated(runId, n, 'failed', detail);
        throw err;
      case 'stop':
        // The daemon is stopping: the journal stays 'intent' and the next start looks for the label.
        throw err;
    }
  }
  deps.logSecrets.noteInstanceKey(instanceId, instanceApiKey);
  const made = adopted(deps, input, instanceId, sentAt);
  // On-demand, `success: false` naming the instance made a stopped contract that will not start by
  // itself (dstack #4036): recorded (the run owns it) and destroyed at once by the machine. A bid's
  // is its pending answer (issue #30): followed like any other. A restart reads the journal's
  // `created` and follows it: stopped, it is a loss once the stop lasts (run-rules.ts STOPPED_BLIP_MS).
  if (unsuccessful !== undefined && input.bidPrice === null && made.kind === 'created') {
    return { ...made, createdStopped: `instance ${instanceId} was created but the service answered ${unsuccessful}` };
  }
  return made;
}

/**
 * Attempt n takes a warm instance (issue #51): the hold's end and the attempt's holding of it in one
 * transaction (through the money gate like a create: every path to money passes the same caps),
 * then one update_template call that gives it this attempt's onstart (its task wrapper and backstop)
 * and recycles it: a fresh container from the same image, disk and environment (the reuse key made
 * them the same). The workdir is uploaded into it as on any attempt.
 */
async function takeWarm(
  deps: RunActorDeps,
  spec: RunPlan,
  input: CreateInput,
  warm: WarmOffer,
  signal: AbortSignal,
): Promise<CreateResult> {
  const { runId, n } = input;
  const onstart = onstartFor(deps, spec, input);
  const script = onstart.script ?? '';
  const sha = sha256Hex(script);
  let taken: boolean;
  try {
    taken = await deps.money.gate.admit({ ...input, dphTotal: warm.dphTotal }, signal, () =>
      deps.journal.takeWarm(input, warm.holdId, warm.instanceId, sha, deps.clock.now()),
    );
  } catch (err) {
    if (!(err instanceof CreateAbandoned)) throw err;
    deps.journal.begin(input, deps.clock.now());
    deps.journal.notCreated(runId, n, 'failed', err.message);
    return { kind: 'create_failed', detail: err.message };
  }
  if (!taken) {
    const row = deps.journal.find(runId, n);
    // Not fresh: an earlier run of this actor journaled the attempt; what it recorded stands.
    if (row && row.create_state !== 'offer_gone') return journaled(deps, input, row, signal);
    return { kind: 'offer_gone', detail: `warm instance ${warm.instanceId} was taken or released first` };
  }
  deps.claims.claim(input.offerId, runId);
  try {
    await deps.client.updateInstance(
      warm.instanceId,
      { image: spec.image, onstart: script, recycle: true, secrets: [...(onstart.secret ? [onstart.secret] : []), ...secretValues(spec)] },
      { signal },
    );
  } catch (err) {
    // The daemon is stopping: the journal says `intent`, and the next start reads the record.
    if (signal.aborted) throw err;
    const row = deps.journal.find(runId, n)!;
    return recycleUnknown(deps, input, row, signal, toRunError(err).message);
  }
  deps.journal.recycleSent(runId, n);
  // Lists started before this moment show the container it replaced (../run-driver.ts drops them).
  return { kind: 'created', instanceId: warm.instanceId, createdAt: deps.clock.now() };
}

/**
 * A taken instance's recycle that may or may not have happened (a restart found it journaled as
 * `intent`, or the call failed): the instance's record says which onstart it has (show_instances.yaml
 * `onstart`). This attempt's: the recycle went through. Any other, or no record: it is destroyed
 * and the run fails over. Never sent again: a second recycle after a first that went through could
 * start the task twice.
 */
async function recycleUnknown(
  deps: RunActorDeps,
  input: CreateInput,
  row: AttemptRow,
  signal: AbortSignal,
  failed?: string,
): Promise<CreateResult> {
  const instanceId = row.instance_id!;
  const record = await deps.lists.lookAt(instanceId, deps.clock.now(), signal);
  const onstart = record?.['onstart'];
  if (typeof onstart === 'string' && row.recycle_sha !== null && sha256Hex(onstart) === row.recycle_sha) {
    deps.journal.recycleSent(input.runId, input.n);
    return { kind: 'created', instanceId, createdAt: deps.clock.now() };
  }
  const why = failed ?? "its outcome is unknown (berth stopped while it was sent) and the record does not show this attempt's onstart";
  return {
    kind: 'created',
    instanceId,
    createdAt: deps.clock.now(),
    createdStopped: `the recycle of warm instance ${instanceId} did not go through: ${why}`,
  };
}

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The onstart to send: the spec's script, followed (with readiness.callback_url) by the line that
 * posts this attempt's token once it has run. `secret`: the token, which service text must not show.
 */
function onstartFor(deps: RunActorDeps, spec: RunPlan, input: CreateInput): { script?: string | undefined; secret?: string } {
  const { runId, n } = input;
  if (spec.task) return taskOnstartFor(deps, spec, spec.task, input);
  const user = spec.onstart ? encodeOnstart(spec.onstart) : undefined;
  if (!deps.readyCallback) return { script: user };
  const token = deps.readyCallback.tokens.tokenFor(runId, n);
  // A script that only just fits the service's limit leaves no room: it goes alone (SSH still tells readiness).
  const script = encodeOnstartWith(spec.onstart, callbackLine(deps.readyCallback.url, token)) ?? user;
  return { script, secret: token };
}

/**
 * A task's onstart: the user's script, the readiness callback (when it still fits) and the task
 * wrapper (src/job-spec/task-script.ts), compressed together when long. Validation made sure the
 * wrapper fits without the callback line.
 */
function taskOnstartFor(deps: RunActorDeps, spec: RunPlan, task: TaskPlan, input: CreateInput): { script: string; secret?: string } {
  const base = {
    onstart: spec.onstart,
    run: task.run,
    runId: input.runId,
    n: input.n,
    serviceUrl: deps.serviceUrl,
    backstop: backstopOf(deps, spec, input),
    // Before the boot deadline (which counts from the create's answer, later than now), less a
    // margin for the host's clock: a first start after it runs nothing (issue #49). Not for a bid:
    // one outbid at its create first starts once its raised bid wins, with a boot deadline anew.
    startByS:
      input.bidPrice === null
        ? deps.clock.now() / 1000 + spec.boot_timeout_s - Math.min(START_BY_MARGIN_S, spec.boot_timeout_s / 10)
        : undefined,
    // Outputs to download: the self-stop at the task's end waits for them (at most files.outputs_timeout_s).
    // A cloud copy works on a stopped instance: no wait, the GPU stops at once.
    outputsWaitS: spec.collect !== null && spec.collect.cloud === null ? deps.outputs?.waitS : undefined,
    // A failed task's instance is left running for SSH and destroyed by its container at the keep's end (issue #50).
    keepOnFailureS: task.keepOnFailureS > 0 ? task.keepOnFailureS : undefined,
    warmIdleS: task.warmIdleS > 0 ? task.warmIdleS : undefined,
    dir: task.dir,
    workdir: task.workdirSha256 === null ? null : { sha256: task.workdirSha256, waitS: deps.uploadTimeoutS },
  };
  if (deps.readyCallback) {
    const token = deps.readyCallback.tokens.tokenFor(input.runId, input.n);
    try {
      return { script: encodeOnstart(taskScript({ ...base, callbackLine: callbackLine(deps.readyCallback.url, token) })), secret: token };
    } catch {
      // Too long with the callback line: readiness falls back to SSH (or the status).
    }
  }
  return { script: encodeOnstart(taskScript(base)) };
}

/** The most the wrapper's start-by moment is set before the boot deadline, for a host clock ahead of berth's, s. */
const START_BY_MARGIN_S = 5;

/**
 * When the task's wrapper destroys its own instance should no daemon end the run first: what is
 * left of the run's limits at this create (issue #29: a later attempt gets what the earlier ones
 * left, not the whole limits), plus the grace. The runtime left counts from the instance's running,
 * so the boot timeout is added to it; the budget left counts from the create, as the service bills.
 * A task with outputs gets files.outputs_timeout_s more: a limit stops it and takes them first.
 * Null when the run has neither limit.
 */
function backstopOf(deps: RunActorDeps, spec: RunPlan, input: CreateInput): { atS: number; madeAtS: number } | null {
  const left = deps.money.guard.left(input.runId);
  const waits: number[] = [];
  if (left.runtimeS !== null) waits.push(left.runtimeS + spec.boot_timeout_s);
  if (left.usd !== null && input.dphTotal > 0) waits.push((left.usd / input.dphTotal) * 3600);
  if (waits.length === 0) return null;
  const madeAtS = deps.clock.now() / 1000;
  // A task with outputs has them taken at its limit (issue #48): the backstop leaves that much more.
  const collecting = spec.collect !== null ? (deps.outputs?.waitS ?? 0) : 0;
  return { atS: madeAtS + Math.min(...waits) + BACKSTOP_GRACE_S + collecting, madeAtS };
}
