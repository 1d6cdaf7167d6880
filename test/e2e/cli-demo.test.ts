// `berth demo` as a user runs it: one process that must show a fail-over, reach running, cancel,
// prove nothing is left billing, and leave nothing behind.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { packagePath } from '../../src/package-path.js';

function demo(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BERTH_')));
    const proc = spawn(process.execPath, [packagePath('bin', 'berth.js'), 'demo', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 50_000);
    proc.on('error', reject);
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('berth demo', () => {
  it('fails over from the forced exited offer, runs, cancels, leaves nothing billing and cleans up', async () => {
    const r = await demo();
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/attempt 1 on offer \d+ \(machine \d+\): exited/);
    expect(r.stdout).toMatch(/Fail-over: attempt 1 on offer \d+ ended exited/);
    expect(r.stdout).toMatch(/is running after .*: ssh -p \d+ root@\S+/);
    // Readiness: the instance runs by the list first, and the run is running once SSH answers.
    expect(r.stdout).toMatch(/booting .* running {2}waiting for SSH/);
    expect(r.stdout).toMatch(/attempt 2: SSH reachable after \d+\.\d s at 127\.0\.0\.1:\d+ \(proxy\), 127\.0\.0\.1:\d+ \(direct\)/);
    expect(r.stdout).toMatch(/Last log lines of attempt 1 \(instance \d+, exited\):\n.*\n {2}\| Container C\.\d+ exited with code 1/);
    expect(r.stdout).toMatch(/^\s+1\s+\d+\s+\d+\s+\d+\s+exited\s/m);
    expect(r.stdout).toMatch(/^\s+2\s+\d+\s+\d+\s+\d+\s+running\s/m);
    expect(r.stdout).toContain('nothing left billing');
    const home = /BERTH_HOME (\S+)\)/.exec(r.stdout)?.[1];
    expect(home).toBeDefined();
    expect(existsSync(home!)).toBe(false);
  }, 60_000);

  it('--task: fails over, runs the task to its end, shows its output and exit code, leaves nothing billing', async () => {
    const r = await demo('--task');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/Fail-over: attempt 1 on offer \d+ ended exited/);
    // The instance that exited while booting never made the run `running`: its attempt is a boot failure.
    expect(r.stdout).toMatch(/attempt 1 on offer \d+ \(machine \d+\): exited/);
    expect(r.stdout).toMatch(/attempt 2 on offer \d+ \(machine \d+\): succeeded \(the task exited with code 0\)/);
    expect(r.stdout).toMatch(
      /\| epoch 1\/3: loss 0\.7\n {2}\| epoch 2\/3: loss 0\.5\n {2}\| epoch 3\/3: loss 0\.3\n {2}\| saved the model/,
    );
    expect(r.stdout).toMatch(/\| berth-task-end run=\S+ attempt=2 exit=0/);
    expect(r.stdout).toMatch(/Run \S+ succeeded; the simulator's ledger shows nothing left billing/);
    const home = /BERTH_HOME (\S+)\)/.exec(r.stdout)?.[1];
    expect(existsSync(home!)).toBe(false);
  }, 60_000);
});
