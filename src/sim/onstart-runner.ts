// Opt-in: runs an instance's onstart script as its container would, on **every** container start:
// the first boot, a start after a stop (the user's, an outbid's end, a service stop's), and a
// reboot. The service's docs say so: "Place startup commands in /root/onstart.sh. This script runs
// automatically on container startup" (vast-ai/docs guides/reference/faq/instances.mdx, "How can I
// restart programs when my instance restarts?"); "Add to /root/onstart.sh for persistence across
// restarts" (guides/reference/faq/technical.mdx); the template's "On-start Script ... will be run
// during instance startup" (guides/templates/template-settings.mdx). Each run starts the script
// from the beginning, in the instance's own directory: the container's files survive a stop, a
// reboot and an outbid ("When an instance is "stopped" all of your data on the instance is
// preserved", cli/reference/stop-instance.mdx; "Stopped instances: Data persists", faq/instances.mdx;
// a reboot "executes docker stop/start commands", reboot_instance.yaml, which keep a container's
// files), so what one run left there the next finds. Only a destroy removes it ("Destroyed
// instances: All data is permanently deleted", faq/instances.mdx) or a recycle, which "destroys and
// recreates container in place" (recycle_instance.yaml): the recycled instance's next run starts in
// a new, empty directory with a new container log. Nothing of the old container is kept (the
// strict reading: the service documents no volume that a recycle keeps).
//
// It runs on this machine, so it runs contained as far as a plain process can be: `sh -c SCRIPT`
// in the instance's directory (also HOME and TMPDIR), its own process group, a clean environment (the
// configured PATH, the instance's env, CONTAINER_API_KEY, CONTAINER_ID, VAST_CONTAINERLABEL,
// BERTH_SIM_URL), a wall-time limit, and, when the simulator runs as root, as the unprivileged
// user 65534 (`nobody`), who owns the instance's directory. Images matched by
// `no_http_client_images` get a PATH without curl and wget (container-path.ts).
//
// Per instance a run is
//   running — from the container's start; left when the script exits, when its time is up, when
//             the container stops, reboots or exits or the instance is destroyed (the group is
//             SIGKILLed), or when the simulator closes;
//   ended   — its result (exit code, the first stdout/stderr bytes) is the history record's
//             `onstart`, and its output stays in the container log until the instance is destroyed.
// The instance's directory is made at its first run and removed once it is destroyed and every run
// in it has closed (or when the simulator closes).
// The combined output of all runs is kept as `docker logs` keeps it: the last `log_bytes` bytes
// (rolling-output.ts). While a script runs, the instance's GPU counts as busy (`gpu_util`).
import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { SimClock, SimTime } from './clock.js';
import type { Line } from './container-logs.js';
import type { SimConfig } from './config.js';
import { HTTP_CLIENTS, pathWithout, removeBin } from './container-path.js';
import type { LiveInstance, OnstartResult } from './instances.js';
import { RollingOutput } from './rolling-output.js';

/** The unprivileged user and group scripts run as when the simulator runs as root (`nobody`). */
const UNPRIVILEGED_ID = 65534;

interface Run {
  instanceId: number;
  child: ChildProcess;
  /** Which run of its instance this is, from 1. */
  n: number;
  done: Promise<void>;
}

export class OnstartRunner {
  /** The current run of each instance (a killed one stays until it has closed, or a new one starts). */
  private readonly current = new Map<number, Run>();
  /** Every run not yet closed, killed ones included: close() waits for them all. */
  private readonly live = new Set<Run>();
  /** Each instance's directory (its container's files), kept across its runs until it is destroyed. */
  private readonly dirs = new Map<number, string>();
  /** Each instance's output, every run in its own segment keyed by its `running` status's index. */
  private readonly outputs = new Map<number, RollingOutput>();
  private readonly noHttpImages: RegExp[];
  /** The bin directory of the PATH without HTTP clients, made at its first use. */
  private noHttpBin: string | null = null;
  /** Where scratch and bin directories go: a directory the scripts' user can reach (see scratchRoot). */
  private root: string | null = null;

  constructor(
    private readonly cfg: SimConfig['onstart_exec'],
    private readonly clock: SimClock,
    private readonly simUrl: () => string,
  ) {
    this.noHttpImages = cfg.no_http_client_images.map((p) => new RegExp(p));
  }

  /**
   * The container of `inst` has just started (its latest status is `running`): runs its script
   * from the beginning, unless disabled or empty. A run of an earlier start still alive is killed.
   */
  maybeRun(inst: LiveInstance): void {
    const script = inst.params.onstart;
    if (!this.cfg.enabled || script.trim() === '') return;
    const id = inst.hist.id;
    this.stop(id);
    const n = ++inst.hist.onstart_runs;
    const startedAt = this.clock.stamp();
    const statusIndex = inst.hist.statuses.length - 1;
    let output = this.outputs.get(id);
    if (!output) this.outputs.set(id, (output = new RollingOutput(this.cfg.log_bytes)));
    output.begin(statusIndex);

    let dir: string;
    let path: string;
    try {
      path = this.pathFor(inst.params.image);
      dir = this.dirOf(id);
    } catch (e) {
      // A full or read-only tmpdir must not take the simulator down: record it as the script's failure.
      const stderr = `berth simulator: cannot make the instance's directory: ${String(e)}`;
      this.record(inst, n, { exit_code: null, signal: null, timed_out: false, stdout: '', stderr, truncated: false }, startedAt);
      return;
    }
    const child = spawn('/bin/sh', ['-c', script], {
      cwd: dir,
      detached: true, // own process group, so a timeout kills the script's children too
      stdio: ['ignore', 'pipe', 'pipe'],
      ...runAs(),
      env: this.envOf(inst, dir, path),
    });
    const out = new Capped(this.cfg.max_output_bytes);
    const err = new Capped(this.cfg.max_output_bytes);
    inst.gpuBusy = true;
    // Each chunk at its sim moment: its lines take their place among sshd's in the container log.
    child.stdout!.on('data', (b: Buffer) => (out.add(b), output.add(statusIndex, b, this.clock.simS())));
    child.stderr!.on('data', (b: Buffer) => (err.add(b), output.add(statusIndex, b, this.clock.simS())));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, this.cfg.timeout_s * 1000);
    const run: Run = { instanceId: id, child, n, done: Promise.resolve() };
    run.done = new Promise<void>((resolve) => {
      let finished = false;
      const finish = (code: number | null, signal: NodeJS.Signals | null) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        const stillCurrent = this.current.get(id) === run;
        if (stillCurrent) {
          inst.gpuBusy = false;
          this.current.delete(id);
        }
        this.record(
          inst,
          n,
          {
            exit_code: code,
            signal,
            timed_out: timedOut,
            stdout: out.text(),
            stderr: err.text(),
            truncated: out.truncated || err.truncated,
          },
          startedAt,
        );
        this.live.delete(run);
        resolve();
      };
      child.on('close', finish);
      child.on('error', (e) => {
        err.add(Buffer.from(String(e)));
        finish(null, null);
      });
    });
    this.current.set(id, run);
    this.live.add(run);
  }

  /** The container stopped, rebooted or exited: its script dies with it. */
  stop(instanceId: number): void {
    const r = this.current.get(instanceId);
    if (r) killGroup(r.child);
  }

  /** Each run's output lines so far (stdout and stderr as they came, the last bytes), each at its moment, by its `running` status's index. */
  output(instanceId: number): Map<number, Line[]> {
    return this.outputs.get(instanceId)?.lines() ?? new Map<number, Line[]>();
  }

  /** The instance is destroyed: kill its script, drop its output, and remove its directory once its runs have closed. */
  forget(instanceId: number): void {
    this.dropContainer(instanceId);
  }

  /** The instance is recycled: its container goes as at a destroy; the next start makes a new, empty one. */
  recycled(instanceId: number): void {
    this.dropContainer(instanceId);
  }

  private dropContainer(instanceId: number): void {
    this.stop(instanceId);
    this.outputs.delete(instanceId);
    const dir = this.dirs.get(instanceId);
    if (dir === undefined) return;
    this.dirs.delete(instanceId);
    const runs = [...this.live].filter((r) => r.instanceId === instanceId);
    void Promise.all(runs.map((r) => r.done)).then(() => rmSync(dir, { recursive: true, force: true }));
  }

  async close(): Promise<void> {
    const all = [...this.live];
    for (const r of all) killGroup(r.child);
    await Promise.all(all.map((r) => r.done));
    for (const dir of this.dirs.values()) rmSync(dir, { recursive: true, force: true });
    this.dirs.clear();
    if (this.noHttpBin) removeBin(this.noHttpBin);
    this.noHttpBin = null;
  }

  /**
   * What a process in the instance's container gets (an SSH session's command, ssh-server.ts, as
   * onstart): its directory (made at first need) and the environment a run of its script gets.
   */
  container(inst: LiveInstance): { dir: string; env: NodeJS.ProcessEnv } {
    const dir = this.dirOf(inst.hist.id);
    return { dir, env: this.envOf(inst, dir, this.pathFor(inst.params.image)) };
  }

  private envOf(inst: LiveInstance, dir: string, path: string): NodeJS.ProcessEnv {
    const id = inst.hist.id;
    return {
      PATH: path,
      HOME: dir,
      // A container's /tmp is its own: the script's temp files (berth's decoded onstart among them)
      // stay in the instance's directory, which goes with the instance, not in the machine's /tmp.
      TMPDIR: dir,
      ...inst.params.env,
      CONTAINER_API_KEY: inst.apiKey,
      CONTAINER_ID: String(id),
      VAST_CONTAINERLABEL: `C.${id}`,
      BERTH_SIM_URL: this.simUrl(),
    };
  }

  /** The instance's directory, made (owned by the scripts' user) at its first run. */
  private dirOf(instanceId: number): string {
    let dir = this.dirs.get(instanceId);
    if (dir === undefined) {
      dir = mkdtempSync(join(this.scratchRoot(), 'berth-sim-onstart-'));
      this.dirs.set(instanceId, dir);
      if (asRoot()) chownSync(dir, UNPRIVILEGED_ID, UNPRIVILEGED_ID);
    }
    return dir;
  }

  private pathFor(image: string): string {
    if (!this.noHttpImages.some((re) => re.test(image))) return this.cfg.path;
    this.noHttpBin ??= pathWithout(this.scratchRoot(), this.cfg.path, HTTP_CLIENTS);
    return this.noHttpBin;
  }

  /**
   * The temp directory, if the unprivileged user can pass through every directory above it, else
   * /tmp: a script that runs as another user must reach its HOME, TMPDIR and PATH by absolute path
   * (a test's private TMPDIR, mode 0700, would let it into its working directory only).
   */
  private scratchRoot(): string {
    this.root ??= !asRoot() || searchableByOthers(tmpdir()) ? tmpdir() : '/tmp';
    return this.root;
  }

  /** The history keeps the latest run's result (a killed older run closing late does not overwrite it). */
  private record(inst: LiveInstance, n: number, r: Omit<OnstartResult, 'run' | 'started_at' | 'ended_at'>, startedAt: SimTime): void {
    if ((inst.hist.onstart?.run ?? 0) > n) return;
    inst.hist.onstart = { run: n, ...r, started_at: startedAt, ended_at: this.clock.stamp() };
  }
}

/** Whether every directory from `dir` up to / lets others through (o+x). */
function searchableByOthers(dir: string): boolean {
  try {
    for (let d = realpathSync(dir); ; d = dirname(d)) {
      if ((statSync(d).mode & 0o001) === 0) return false;
      if (d === dirname(d)) return true;
    }
  } catch {
    return false;
  }
}

function asRoot(): boolean {
  return process.getuid?.() === 0;
}

/** The user a container's processes run as: `nobody` when the simulator runs as root, else its own. */
export function runAs(): { uid?: number; gid?: number } {
  return asRoot() ? { uid: UNPRIVILEGED_ID, gid: UNPRIVILEGED_ID } : {};
}

/**
 * Kills the run's whole process group, also after its shell exited: until the run closes, children
 * still hold its output pipes (a background backstop), so the group, and its id, still exist.
 */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** Keeps the first `max` bytes of a stream (the history record's stdout and stderr). */
class Capped {
  private readonly parts: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly max: number) {}

  add(b: Buffer): void {
    const room = this.max - this.size;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    const part = b.length > room ? b.subarray(0, room) : b;
    if (part !== b) this.truncated = true;
    this.parts.push(part);
    this.size += part.length;
  }

  text(): string {
    return Buffer.concat(this.parts).toString('utf8');
  }
}
