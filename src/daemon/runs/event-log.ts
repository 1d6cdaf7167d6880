// Turns what the run machine reports into lines of the run's event log (the attempts rows are the
// journal's: ./attempt-journal.ts). Called inside the transaction that also saves the snapshot, so
// the log and the state never disagree.
import { countText } from '../../count-text.js';
import type { RunEmitted } from '../../../machines/run-machine.js';
import { sshEndpoints } from '../../../machines/run-rules.js';
import type { ResolvedJobSpec } from '../../job-spec/schema.js';
import { describeRelaxStep } from '../../job-spec/search-query.js';
import type { Store } from '../../store/index.js';
import { outputsMissing, specNamesOutputs } from './outputs-missing.js';

export interface LoggedEvent {
  /** The event-log row. */
  id: number;
  type: string;
  message: string;
  level: 'info' | 'warn';
  data: unknown;
}

function sshLine(host: string | null | undefined, port: number | null | undefined): string {
  return host && port ? `; ssh -p ${port} root@${host}` : '';
}

/** The SSH line(s) of a running instance: every endpoint that answered, else the listed proxy. */
function sshLines(e: Extract<RunEmitted, { type: 'attempt.running' }>): string {
  if (e.reachable?.length) return e.reachable.map((r) => `; ssh -p ${r.port} root@${r.host} (${r.kind})`).join('');
  return sshLine(e.status.ssh_host, e.status.ssh_port);
}

/** Attempt outcomes that are an end the user asked for, logged at info (the rest at warn). */
const ATTEMPT_ENDS_AS_ASKED: ReadonlySet<string> = new Set(['running', 'succeeded', 'cancelled']);

const READY_BY = { ssh: 'its SSH answered', status: 'its status is running', callback: 'its onstart called back' } as const;

/** How a run ready by SSH got there: a login that ran a command, or the banner alone and why. */
function readyBy(e: Extract<RunEmitted, { type: 'attempt.running' }>): string {
  if (e.via !== 'ssh' || !e.login) return READY_BY[e.via];
  return e.login.ok
    ? 'berth logged in over SSH and ran a command'
    : `its SSH answered with a banner; berth did not log in: ${e.login.why}, so it is ready by the banner alone`;
}

/** `host:port (proxy) and host:port (direct)`: where SSH is being waited for. */
function endpointsText(status: Extract<RunEmitted, { type: 'attempt.status' }>['status']): string {
  const where = sshEndpoints(status).map((p) => `${p.host}:${p.port} (${p.kind})`);
  return where.length ? ` at ${where.join(' and ')}` : '';
}

/** ` after 1.2 s`: how long SSH took to answer once the list showed the instance running. */
function sshWait(store: Store, runId: string, e: Extract<RunEmitted, { type: 'attempt.running' }>, at: number): string {
  const seen = e.via === 'ssh' ? store.attempts.get(runId, e.n)?.first_running_at : null;
  return seen == null ? '' : ` ${((at - seen) / 1000).toFixed(1)} s after it was listed running`;
}

/**
 * Applies one emitted event to the store and returns the line written to the event log. `state` is
 * the run's state after the transition that emitted it.
 */
export function recordEmitted(store: Store, spec: ResolvedJobSpec, runId: string, e: RunEmitted, at: number, state?: string): LoggedEvent {
  const append = (message: string, data: unknown, level: 'info' | 'warn' = 'info', foldKey?: string): LoggedEvent => {
    const id = store.events.append({ runId, at, type: e.type, message, data, ...(foldKey === undefined ? {} : { foldKey }) });
    return { id, type: e.type, message, level, data };
  };
  // A run's end whose outputs were not all taken says so, in its event and so its notification (issue #48).
  const ending = (message: string, data: Record<string, unknown> | null, level: 'info' | 'warn' = 'info'): LoggedEvent => {
    const end = e.type === 'run.succeeded' ? 'succeeded' : e.type.slice('run.'.length);
    const missing = specNamesOutputs(spec)
      ? outputsMissing({ id: runId, state: end, ended: true, outputs: true }, store.attempts.forRun(runId), store.outputs.forRun(runId))
      : null;
    if (!missing) return append(message, data, level);
    return append(`${message}; its outputs were not all taken: ${missing.cause}`, { ...data, outputs_missing: missing }, 'warn');
  };
  switch (e.type) {
    // The events an outage repeats fold into one row with a count (see src/store/events.ts).
    case 'search.started':
      return append(
        `searching offers (relax level ${e.relaxLevel})`,
        { relaxLevel: e.relaxLevel },
        'info',
        `search.started:${e.relaxLevel}`,
      );
    case 'search.found':
      return append(`found ${countText(e.count, 'usable offer')}`, { relaxLevel: e.relaxLevel, count: e.count });
    case 'search.retry':
      return append(
        `search failed (${e.error.kind}: ${e.error.message}); searching again at ${new Date(e.retryAt).toISOString()}`,
        { error: e.error, retryAt: e.retryAt },
        'warn',
        `search.retry:${e.error.kind}`,
      );
    case 'relaxed': {
      const step = spec.relax[e.level - 1];
      return append(`no usable offer; relaxed the search: ${step ? describeRelaxStep(step) : `step ${e.level}`}`, { level: e.level });
    }
    case 'attempt.started':
      return append(`attempt #${e.n}: offer ${e.offerId} on machine ${e.machineId} at $${e.dphTotal.toFixed(3)}/h`, {
        n: e.n,
        offerId: e.offerId,
        machineId: e.machineId,
        dphTotal: e.dphTotal,
      });
    case 'attempt.instance': {
      // A warm instance taken (issue #51) was not created: its container is made again by a recycle.
      const warm = store.attempts.get(runId, e.n)?.warm_hold_id ?? null;
      return warm === null
        ? append(`attempt #${e.n}: instance ${e.instanceId} created`, { n: e.n, instanceId: e.instanceId })
        : append(
            `attempt #${e.n}: took warm instance ${e.instanceId} (hold #${warm}); its container is made again for this run (recycle)`,
            {
              n: e.n,
              instanceId: e.instanceId,
              warmHoldId: warm,
            },
          );
    }
    case 'attempt.status': {
      // Running by the list while the run still boots: it waits for SSH before it counts as running.
      const waiting = state === 'booting' && e.status.actual_status === 'running' ? `; waiting for SSH${endpointsText(e.status)}` : '';
      return append(`attempt #${e.n}: instance ${e.status.id} is ${e.status.actual_status ?? 'provisioning'}${waiting}`, {
        n: e.n,
        status: e.status.actual_status,
      });
    }
    case 'attempt.running':
      return append(
        `attempt #${e.n}: instance ${e.status.id} is ready (${readyBy(e)}${sshWait(store, runId, e, at)})${sshLines(e)}`,
        {
          n: e.n,
          instanceId: e.status.id,
          sshHost: e.status.ssh_host,
          sshPort: e.status.ssh_port,
          reachable: e.reachable,
          via: e.via,
          ...(e.login ? { login: e.login } : {}),
        },
        e.login?.ok === false ? 'warn' : 'info',
      );
    case 'attempt.ending':
      return append(
        `attempt #${e.n}: instance ${e.instanceId} goes (${e.outcome}${e.detail ? `: ${e.detail}` : ''})`,
        {
          n: e.n,
          instanceId: e.instanceId,
          outcome: e.outcome,
        },
        e.outcome === 'cancelled' || e.outcome === 'expired' ? 'info' : 'warn',
      );
    case 'bid.raised':
      return append(
        `attempt #${e.n}: outbid; bid for instance ${e.instanceId} raised to $${e.price}/h`,
        {
          n: e.n,
          instanceId: e.instanceId,
          price: e.price,
          dphTotal: e.dphTotal,
        },
        'warn',
      );
    case 'search.switched':
      return append('outbid: searching on-demand offers from now on (on_outbid "on_demand")', { to: e.to }, 'warn');
    case 'attempt.ended':
      return append(
        `attempt #${e.n} ended: ${e.outcome}${e.detail ? ` (${e.detail})` : ''}`,
        {
          n: e.n,
          outcome: e.outcome,
          detail: e.detail,
        },
        // An attempt that ended as asked (its task succeeded, a cancel) is news, not a warning (issue #50).
        ATTEMPT_ENDS_AS_ASKED.has(e.outcome) ? 'info' : 'warn',
      );
    case 'destroy.requested':
      return append(`attempt #${e.n}: destroying instance ${e.instanceId}`, { n: e.n, instanceId: e.instanceId });
    case 'destroy.retry':
      return append(
        `attempt #${e.n}: destroy of instance ${e.instanceId} not done (${e.error.kind}: ${e.error.message}); trying again at ${new Date(e.retryAt).toISOString()}`,
        { n: e.n, instanceId: e.instanceId, error: e.error },
        'warn',
        `destroy.retry:${e.n}:${e.instanceId}:${e.error.kind}`,
      );
    case 'destroy.confirmed':
      return append(`attempt #${e.n}: instance ${e.instanceId} is gone`, { n: e.n, instanceId: e.instanceId });
    case 'instance.warm':
      return append(
        `attempt #${e.n}: instance ${e.instanceId} kept warm (hold #${e.holdId}) for the next run of this spec until ${new Date(e.idleUntil).toISOString()}; it bills its GPU meanwhile, then it is destroyed`,
        { n: e.n, instanceId: e.instanceId, holdId: e.holdId, idleUntil: e.idleUntil },
      );
    case 'run.failed':
      return ending(`run failed (${e.error.kind}): ${e.error.message}`, { error: e.error }, 'warn');
    case 'run.cancelled':
      return ending('run cancelled; it holds no instance', null);
    case 'run.expired':
      return ending(`run expired (${e.error.kind}): ${e.error.message}; it holds no instance`, { error: e.error }, 'warn');
    case 'task.ended':
      return append(
        `attempt #${e.n}: the task on instance ${e.instanceId} exited with code ${e.exitCode}`,
        { n: e.n, instanceId: e.instanceId, exitCode: e.exitCode },
        e.exitCode === 0 ? 'info' : 'warn',
      );
    case 'run.succeeded':
      return ending('run succeeded: the task exited with code 0; it holds no instance', { exitCode: 0 });
    // The outputs' transfer holds a billed instance: its time is in the events, its money in the spend.
    case 'outputs.started':
      return append(
        `attempt #${e.n}: taking the task's outputs from instance ${e.instanceId} before its destroy (until ${new Date(e.until).toISOString()}; the instance bills meanwhile)`,
        { n: e.n, instanceId: e.instanceId, until: e.until },
      );
    case 'outputs.ended':
      if (e.result.state === 'copied')
        return append(
          `attempt #${e.n}: outputs copied to ${e.result.detail} in ${(e.result.tookMs / 1000).toFixed(1)} s, the instance stopped (its disk billing, not its GPU)`,
          { n: e.n, instanceId: e.instanceId, ...e.result },
        );
      return append(
        `attempt #${e.n}: outputs ${e.result.state}: ${countText(e.result.files, 'file')}, ${e.result.bytes} bytes in ${(e.result.tookMs / 1000).toFixed(1)} s of instance time${e.result.detail ? ` (${e.result.detail})` : ''}`,
        { n: e.n, instanceId: e.instanceId, ...e.result },
        e.result.state === 'kept' ? 'info' : 'warn',
      );
    case 'outputs.over_limit':
      return append(
        `attempt #${e.n}: a limit was reached (${e.reason.kind}: ${e.reason.message}) while the task's outputs are taken; they go on until ${new Date(e.until).toISOString()} at most (files.outputs_timeout_s), then instance ${e.instanceId} is destroyed`,
        { n: e.n, instanceId: e.instanceId, reason: e.reason, until: e.until },
        'warn',
      );
    // A kept instance bills its GPU: its bound is in the event, its money in the spend (issue #50).
    case 'task.kept':
      return append(
        `attempt #${e.n}: the task failed for good; instance ${e.instanceId} is kept for SSH (\`berth ssh\`) until ${new Date(e.until).toISOString()} (keep_on_failure_s), billing meanwhile, then destroyed`,
        { n: e.n, instanceId: e.instanceId, until: e.until },
        'warn',
      );
    case 'task.keep_ended':
      return append(`attempt #${e.n}: the keep of instance ${e.instanceId} ended early (${e.why}); destroying it now`, {
        n: e.n,
        instanceId: e.instanceId,
        why: e.why,
      });
    case 'outputs.cut':
      return append(
        `attempt #${e.n}: the outputs' transfer from instance ${e.instanceId} stopped (${e.why}); what came is kept, marked partial`,
        { n: e.n, instanceId: e.instanceId, why: e.why },
        'warn',
      );
  }
}
