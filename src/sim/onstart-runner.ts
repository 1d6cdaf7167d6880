// Opt-in: runs an instance's onstart script as a container would when it reaches `running`:
// `sh -c SCRIPT` in a scratch directory, with the instance's env plus CONTAINER_API_KEY,
// CONTAINER_ID and BERTH_SIM_URL, under a wall-time limit. The result (exit code, capped
// stdout/stderr) goes on the instance's history record; stdout and stderr interleaved as they came
// are kept for the container log (`output`) until the instance is destroyed. A script's process
// group is killed when its time is up, when the instance stops or is destroyed, and when the
// simulator closes. While a script runs, the instance's GPU counts as busy (`gpu_util`).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SimClock } from './clock.js';
import type { SimConfig } from './config.js';
import type { LiveInstance } from './instances.js';

interface Running {
  child: ChildProcess;
  dir: string;
  done: Promise<void>;
}

export class OnstartRunner {
  private readonly running = new Map<number, Running>();
  /** stdout and stderr in arrival order, per instance, while the script runs and after. */
  private readonly combined = new Map<number, Capped>();

  constructor(
    private readonly cfg: SimConfig['onstart_exec'],
    private readonly clock: SimClock,
    private readonly simUrl: () => string,
  ) {}

  /** Starts the script unless disabled, empty, or already run for this instance. */
  maybeRun(inst: LiveInstance): void {
    const script = inst.params.onstart;
    if (!this.cfg.enabled || script.trim() === '' || inst.hist.onstart || this.running.has(inst.hist.id)) return;
    const id = inst.hist.id;
    const startedAt = this.clock.stamp();
    let dir: string;
    try {
      dir = mkdtempSync(join(tmpdir(), 'berth-sim-onstart-'));
    } catch (e) {
      // A full or read-only tmpdir must not take the simulator down: record it as the script's failure.
      const stderr = `berth simulator: cannot make a scratch directory: ${String(e)}`;
      inst.hist.onstart = {
        exit_code: null,
        signal: null,
        timed_out: false,
        stdout: '',
        stderr,
        truncated: false,
        started_at: startedAt,
        ended_at: startedAt,
      };
      return;
    }
    const child = spawn('sh', ['-c', script], {
      cwd: dir,
      detached: true, // own process group, so a timeout kills the script's children too
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: this.cfg.path,
        HOME: dir,
        // A container's /tmp is its own: the script's temp files (berth's decoded onstart among them)
        // stay in the scratch directory, which goes with the script, not in the machine's /tmp.
        TMPDIR: dir,
        ...inst.params.env,
        CONTAINER_API_KEY: inst.apiKey,
        CONTAINER_ID: String(id),
        VAST_CONTAINERLABEL: `C.${id}`,
        BERTH_SIM_URL: this.simUrl(),
      },
    });
    const out = new Capped(this.cfg.max_output_bytes);
    const err = new Capped(this.cfg.max_output_bytes);
    const both = new Capped(this.cfg.max_output_bytes);
    this.combined.set(id, both);
    inst.gpuBusy = true;
    child.stdout!.on('data', (b: Buffer) => (out.add(b), both.add(b)));
    child.stderr!.on('data', (b: Buffer) => (err.add(b), both.add(b)));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, this.cfg.timeout_s * 1000);
    const done = new Promise<void>((resolve) => {
      const finish = (code: number | null, signal: NodeJS.Signals | null) => {
        clearTimeout(timer);
        inst.gpuBusy = false;
        inst.hist.onstart = {
          exit_code: code,
          signal,
          timed_out: timedOut,
          stdout: out.text(),
          stderr: err.text(),
          truncated: out.truncated || err.truncated,
          started_at: startedAt,
          ended_at: this.clock.stamp(),
        };
        this.running.delete(id);
        rmSync(dir, { recursive: true, force: true });
        resolve();
      };
      child.on('close', finish);
      child.on('error', (e) => {
        err.add(Buffer.from(String(e)));
        finish(null, null);
      });
    });
    this.running.set(id, { child, dir, done });
  }

  stop(instanceId: number): void {
    const r = this.running.get(instanceId);
    if (r) killGroup(r.child);
  }

  /** The script's output so far (stdout and stderr as they came); '' when none ran. */
  output(instanceId: number): string {
    return this.combined.get(instanceId)?.text() ?? '';
  }

  /** The instance is destroyed: kill its script and drop its output. */
  forget(instanceId: number): void {
    this.stop(instanceId);
    this.combined.delete(instanceId);
  }

  async close(): Promise<void> {
    const all = [...this.running.values()];
    for (const r of all) killGroup(r.child);
    await Promise.all(all.map((r) => r.done));
  }
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** Keeps the first `max` bytes of a stream. */
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
