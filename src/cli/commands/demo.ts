// `berth demo`: the whole product in one process and well under a minute. A simulated marketplace
// and a real daemon (in a temporary BERTH_HOME), the example job submitted through the control API
// as the CLI does, shown live until it runs, then cancelled and checked against the simulator's
// billing ledger. The offer the daemon tries first is forced to exit while booting, so the demo
// always shows a fail-over. With --task the job is a task instead: once it runs, the demo follows it
// to its end (the task stops its own instance, berth reads its exit code and destroys the instance)
// and shows its output. Everything it started is stopped and removed, whatever happens.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDaemon, type RunningDaemon } from '../../daemon/daemon.js';
import { BerthError } from '../../errors.js';
import { silentLogger } from '../../logger.js';
import { startSimulator, type RunningSimulator } from '../../sim/index.js';
import { ControlClient } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { watchRun } from '../follow.js';
import type { Io } from '../io.js';
import { endedWords, formatDuration, readyText, runDetail, sshCommand } from '../render.js';
import { isEndState, isSettled } from '../../wire/run-states.js';
import type { Run } from '../../wire/control-api.js';
import { abortOnSignals } from '../signals.js';
import {
  DEMO_DAEMON_OVERRIDES,
  DEMO_JOB_FILE,
  DEMO_LATE_SSH_OFFERS,
  DEMO_SEED,
  DEMO_SIM_CONFIG,
  DEMO_TASK_FILE,
  DEMO_TASK_SIM_CONFIG,
  DEMO_TIME_SCALE,
  demoEnv,
  firstChoices,
  readDemoJob,
} from './demo-setup.js';

/** The destroy is confirmed before a run is `cancelled`; this only absorbs the simulator's last tick. */
const BILLING_SETTLE_MS = 3_000;

/** A step of the demo that did not go as it should: the demo exits 1 with this sentence. */
class DemoFailure extends Error {}

export interface DemoOptions {
  /** `--task`: the example task instead of the example job. */
  task?: boolean | undefined;
}

export async function demoCommand(io: Io, options: DemoOptions = {}): Promise<number> {
  const task = options.task === true;
  const jobFile = task ? DEMO_TASK_FILE : DEMO_JOB_FILE;
  const startedAt = Date.now();
  const home = mkdtempSync(join(tmpdir(), 'berth-demo-'));
  const { signal, dispose } = abortOnSignals();
  let sim: RunningSimulator | undefined;
  let daemon: RunningDaemon | undefined;
  try {
    io.out(`berth demo: a simulated marketplace, a real daemon, the example ${task ? 'task' : 'job'}.`);
    io.out('');
    sim = await startSimulator({ seed: DEMO_SEED, timeScale: DEMO_TIME_SCALE, config: task ? DEMO_TASK_SIM_CONFIG : DEMO_SIM_CONFIG });
    const env = demoEnv(home, sim);
    const job = readDemoJob(jobFile);
    const [doomed, ...next] = await firstChoices(env, jobFile);
    sim.setOfferProfile(doomed!.id, 'exited');
    for (const o of next.slice(0, DEMO_LATE_SSH_OFFERS)) sim.setOfferProfile(o.id, 'ssh_late');
    daemon = await startDaemon({ env, listen: '127.0.0.1:0', overrides: DEMO_DAEMON_OVERRIDES, logger: silentLogger() });

    io.out(`  simulator  ${sim.url} (${DEMO_TIME_SCALE}x time, no random faults)`);
    io.out(`  daemon     ${daemon.url} (BERTH_HOME ${home})`);
    io.out(`  job        ${relative(process.cwd(), jobFile)} (${job.name}, at most $${job.maxPrice.toFixed(2)}/h)`);
    io.out(
      `  fault      offer ${doomed!.id} (${doomed!.gpu_name}, machine ${doomed!.machine_id}), the daemon's first choice, will exit while booting`,
    );
    io.out(`  ssh        the offers after it start sshd about 1 s after they report running: berth waits for a banner`);
    io.out('');

    const client = new ControlClient({ url: daemon.url, token: daemon.token });
    const submitted = await client.submit(job.body);
    io.out(`Submitted run ${submitted.id}; following it until it runs.`);
    const running = await watchRun(client, submitted, io, (r) => isSettled(r.state), { signal });
    if (running.state !== 'running') {
      throw new DemoFailure(
        `run ${running.id} ended ${running.state} instead of running: ${running.error?.message ?? 'no error recorded'}`,
      );
    }
    io.out('');
    io.out(
      `Run ${running.id} is running after ${formatDuration(Date.now() - Date.parse(running.created_at))}: ${sshCommand(running.instance) ?? 'no SSH address'}`,
    );
    io.out(readinessSummary(running));
    io.out('');
    runDetail(running, Date.now()).forEach((l) => io.out(l));
    io.out('');
    io.out(failoverSummary(running, doomed!.id));

    io.out('');
    const ended = task ? await followTask(client, running, io, signal) : await cancelRun(client, running, io, signal);
    await checkNothingBilling(sim);
    const ledger = sim.ledger();
    io.out(
      `Run ${ended.id} ${endedWords(ended.state)}; the simulator's ledger shows nothing left billing ` +
        `(${ledger.instances.length} instances created, all destroyed, $${ledger.total_usd.toFixed(4)} charged in simulated time).`,
    );
    io.out(`Demo finished in ${formatDuration(Date.now() - startedAt)}.`);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof BerthError && err.code === 'aborted') {
      io.err('Interrupted: stopping the daemon and the simulator and removing the demo directory (a second Ctrl-C exits at once).');
      return EXIT.interrupted;
    }
    io.err(`The demo failed: ${err instanceof Error ? err.message : String(err)}`);
    return EXIT.runEnded;
  } finally {
    await daemon?.stop().catch(() => undefined);
    await sim?.close().catch(() => undefined);
    rmSync(home, { recursive: true, force: true });
    dispose();
  }
}

/** The plain job: cancelled once it runs, which destroys its instance. */
async function cancelRun(client: ControlClient, running: Run, io: Io, signal: AbortSignal): Promise<Run> {
  io.out(`Cancelling run ${running.id}.`);
  await client.cancel(running.id);
  const ended = await watchRun(client, running, io, (r) => isEndState(r.state), { signal });
  if (ended.state !== 'cancelled') throw new DemoFailure(`run ${ended.id} ended ${ended.state} instead of cancelled`);
  return ended;
}

/** The task: followed to its end (the task stops its own instance; berth reads its exit code and destroys it), then its output. */
async function followTask(client: ControlClient, running: Run, io: Io, signal: AbortSignal): Promise<Run> {
  io.out(`Run ${running.id}'s task is under way; following it to its end (nobody cancels it).`);
  const ended = await watchRun(client, running, io, (r) => isEndState(r.state), { signal });
  if (ended.state !== 'succeeded') {
    throw new DemoFailure(`run ${ended.id} ended ${ended.state} instead of succeeded: ${ended.error?.message ?? 'no error recorded'}`);
  }
  const last = ended.attempts.at(-1);
  io.out('');
  io.out(`The task's output (attempt ${last?.n ?? '?'}, as \`berth logs ${ended.id}\` shows it):`);
  for (const line of (last?.logs ?? '').split('\n').filter((l) => l.trim() !== '')) io.out(`  | ${line}`);
  io.out('');
  io.out(
    `The task exited with code 0: berth saw its instance stop itself, read the exit code from its log, ` +
      `destroyed the instance and ended the run succeeded.`,
  );
  return ended;
}

/** One sentence on what the attempts show: the forced failure, then the healthy offer. */
function failoverSummary(run: Run, doomedOfferId: number): string {
  const first = run.attempts[0];
  if (first?.offer_id === doomedOfferId && first.outcome === 'exited' && run.attempts.length > 1) {
    return `Fail-over: attempt 1 on offer ${doomedOfferId} ended exited; berth destroyed it, blocked its machine and moved on to attempt ${run.attempt}, now running.`;
  }
  return `Note: the daemon did not start with offer ${doomedOfferId} as expected, so this run shows no fail-over.`;
}

/** One sentence on readiness: the instance counted as running only once its SSH answered. */
function readinessSummary(run: Run): string {
  const ready = run.instance?.ready;
  if (ready?.via !== 'ssh') return `Readiness: ${ready ? readyText(ready) : 'not recorded'}.`;
  const where = (run.instance?.ssh ?? []).map((e) => `${e.host}:${e.port} (${e.kind})`).join(' and ');
  return `Readiness: the service listed the instance running; berth waited for SSH and counted it running only once ${where} answered with a banner, ${ready.after_running_s?.toFixed(1) ?? '?'} s later.`;
}

async function checkNothingBilling(sim: RunningSimulator): Promise<void> {
  const until = Date.now() + BILLING_SETTLE_MS;
  while (sim.billingNow().length > 0) {
    if (Date.now() > until) {
      const ids = sim.billingNow().map((h) => h.id);
      throw new DemoFailure(
        `${ids.length === 1 ? 'instance' : 'instances'} ${ids.join(', ')} ${ids.length === 1 ? 'is' : 'are'} still billing after the run was cancelled`,
      );
    }
    await sleep(100);
  }
}
