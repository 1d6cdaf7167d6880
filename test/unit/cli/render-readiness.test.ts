// What people see of readiness and failures: the SSH lines that answered, the wait for SSH, how the
// run learned it was ready, and a failed attempt's last log lines.
import { describe, expect, it } from 'vitest';
import { attemptReadyLine, progressKey, progressLine, runDetail, sshCommand } from '../../../src/cli/render.js';
import type { Run } from '../../../src/wire/control-api.js';

const at = '2026-11-22T12:00:00.000Z';

function run(changes: Partial<Run> = {}, instance: Partial<NonNullable<Run['instance']>> = {}): Run {
  return {
    id: 'r1',
    name: 'job',
    state: 'running',
    gpu: null,
    gpu_rented: false,
    task: false,
    created_at: at,
    updated_at: at,
    attempt: 2,
    relax_level: 0,
    instance: {
      id: 900,
      offer_id: 31,
      machine_id: 310,
      ssh_host: 'ssh4.example',
      ssh_port: 40022,
      actual_status: 'running',
      dph_total: 0.3,
      ssh: [
        { kind: 'proxy', host: 'ssh4.example', port: 40022 },
        { kind: 'direct', host: '203.0.113.9', port: 41022 },
      ],
      ready: { via: 'ssh', at, after_running_s: 2.4 },
      boot_deadline: null,
      keep_until: null,
      ...instance,
    },
    attempts: [
      {
        n: 1,
        offer_id: 30,
        machine_id: 300,
        instance_id: 800,
        outcome: 'unreachable',
        started_at: at,
        ended_at: at,
        detail: 'no banner',
        dph_total: 0.25,
        gpu_name: null,
        num_gpus: null,
        logs: 'Container C.800 started\nsshd: no hostkeys available -- exiting.',
      },
      {
        n: 2,
        offer_id: 31,
        machine_id: 310,
        instance_id: 900,
        outcome: 'running',
        started_at: at,
        ended_at: null,
        detail: null,
        dph_total: 0.3,
        gpu_name: null,
        num_gpus: null,
        logs: null,
      },
    ],
    error: null,
    held: false,
    unreadable: null,
    cost: { usd: 0.012, usd_per_hour: 0.3 },
    outputs: [],
    outputs_missing: null,
    ...changes,
  };
}

describe('readiness in the CLI', () => {
  it('shows every SSH endpoint that answered, how the run was found ready, and the last log lines of failed attempts', () => {
    const lines = runDetail(run(), Date.parse(at));
    expect(lines).toContain('SSH       ssh -p 40022 root@ssh4.example (proxy)');
    expect(lines).toContain('          ssh -p 41022 root@203.0.113.9 (direct)');
    expect(lines).toContain(`Ready     SSH answered 2.4 s after it was listed running (${at})`);
    const logs = lines.indexOf('Last log lines of attempt 1 (instance 800, unreachable):');
    expect(lines.slice(logs + 1, logs + 3)).toEqual(['  | Container C.800 started', '  | sshd: no hostkeys available -- exiting.']);
    expect(sshCommand(run().instance)).toBe('ssh -p 40022 root@ssh4.example (proxy)');
    expect(attemptReadyLine(run())).toBe('attempt 2: SSH reachable after 2.4 s at ssh4.example:40022 (proxy), 203.0.113.9:41022 (direct)');
  });

  it('says the run waits for SSH while the instance runs by the list but has not answered', () => {
    const waiting = run({ state: 'booting' }, { ssh: [], ready: null });
    expect(progressKey(waiting)).toMatch(/instance 900 running {2}waiting for SSH$/);
    expect(runDetail(waiting, Date.parse(at))).toContain('SSH       waiting for SSH at ssh4.example:40022 to answer');
    // A daemon without these fields (or a run ready by status) still shows the listed proxy.
    expect(sshCommand(run({}, { ssh: [], ready: null }).instance)).toBe('ssh -p 40022 root@ssh4.example');
  });

  it('says a failed task instance is kept for SSH until when (keep_on_failure_s), in the detail and the live line', () => {
    const now = Date.parse(at);
    const until = new Date(now + 60_000).toISOString();
    const kept = run({ state: 'keeping' }, { keep_until: until });
    const hhmmss = new Date(until).toLocaleTimeString('en-GB', { hour12: false });
    expect(runDetail(kept, now).join('\n')).toMatch(
      new RegExp(`Kept\\s+kept for SSH until ${hhmmss} \\(keep_on_failure_s\\): \`berth ssh `),
    );
    expect(progressLine(kept, now)).toContain(`(kept for SSH until ${hhmmss} (keep_on_failure_s))`);
    expect(runDetail(run({ state: 'running' }), now).join('\n')).not.toMatch(/kept for SSH/);
  });

  it('shows when a booting instance is given up (its boot deadline), in the detail and the live line, and not once it is ready', () => {
    const now = Date.parse(at);
    const booting = run({ state: 'booting' }, { ready: null, ssh: [], boot_deadline: new Date(now + 125_000).toISOString() });
    expect(runDetail(booting, now).join('\n')).toMatch(/Boot\s+given up in 2m 05s if not ready/);
    expect(progressLine(booting, now)).toContain('(given up in 2m 05s if not ready)');
    const ready = run({ state: 'running' });
    expect(runDetail(ready, now).join('\n')).not.toContain('given up');
    expect(progressLine(ready, now)).not.toContain('given up');
    // Destroyed before it was ready (a cancel, a task that ended): nothing is given up any more (issue #50).
    const destroying = run({ state: 'destroying' }, { ready: null, ssh: [], boot_deadline: new Date(now + 118_000).toISOString() });
    expect(progressLine(destroying, now)).not.toContain('given up');
    expect(runDetail(destroying, now).join('\n')).not.toContain('Boot');
  });

  it('shows the cost so far and per hour while the run may bill, its total once it ended (issue #50)', () => {
    const cost = { usd: 0.0014, usd_per_hour: 0.3 };
    const costLine = (r: Run) => runDetail(r, Date.parse(at)).find((l) => l.startsWith('Cost'));
    expect(costLine(run({ state: 'running', cost } as Partial<Run>))).toMatch(/^Cost\s+\$0\.0014 so far, \$0\.3000\/h now$/);
    expect(costLine(run({ state: 'succeeded', instance: null, cost: { usd: 0.0014, usd_per_hour: 0 } } as Partial<Run>))).toMatch(
      /^Cost\s+\$0\.0014$/,
    );
  });
});
