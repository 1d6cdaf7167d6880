// `berth status` (and `--watch`) on a terminal of 80 columns: the table fits, the columns that
// matter least go first, and RUN, NAME, STATE, PRICE, COST and AGE stay while they can.
import { describe, expect, it } from 'vitest';
import { runsTable } from '../../../src/cli/render.js';
import type { Run } from '../../../src/wire/control-api.js';

const created = '2026-11-22T12:00:00.000Z';
const now = Date.parse(created) + 2 * 3600_000 + 7 * 60_000;

function run(id: string, name: string, state: Run['state'], withInstance: boolean): Run {
  return {
    id,
    name,
    state,
    gpu: null,
    gpu_rented: withInstance,
    task: false,
    created_at: created,
    updated_at: created,
    attempt: 12,
    relax_level: 0,
    instance: withInstance
      ? { id: 19424212, offer_id: 3425329, machine_id: 16209, ssh_host: null, ssh_port: null, actual_status: 'loading', dph_total: 0.162 }
      : null,
    attempts: [],
    error: null,
    held: false,
    unreadable: null,
    cost: { usd: 12.3456, usd_per_hour: withInstance ? 0.162 : 0 },
    outputs: [],
    outputs_missing: null,
  } as Run;
}

const runs = [run('g5mtxsduepdq', 'llm-finetune-7b-lora', 'destroying', true), run('a5mh4agpkjkr', 'first-task', 'succeeded', false)];
const header = (lines: string[]) => lines[0]!.split(/\s+/);

describe('runs table width', () => {
  it('shows every column where there is room (pipes, wide terminals)', () => {
    const lines = runsTable(runs, now);
    expect(header(lines)).toEqual(['RUN', 'NAME', 'STATE', 'EXIT', 'REASON', 'ATTEMPT', 'INSTANCE', 'STATUS', 'PRICE', 'COST', 'AGE']);
    expect(Math.max(...lines.map((l) => l.length))).toBeGreaterThan(80);
  });

  it('says why an ended run failed in REASON (its error kind), and nothing for one that did not', () => {
    const failed = {
      ...run('b5mh4agpkjkr', 'typo-gpu', 'failed', false),
      error: { kind: 'no_offers', message: 'no offer matches' },
    } as Run;
    const lines = runsTable([failed, runs[1]!], now);
    const at = lines[0]!.indexOf('REASON');
    expect(lines[1]!.slice(at)).toMatch(/^no_offers /);
    expect(lines[2]!.slice(at)).toMatch(/^- /);
  });

  it('fits 80 columns by dropping INSTANCE and STATUS (then ATTEMPT) first, keeping EXIT, PRICE, COST and AGE', () => {
    const lines = runsTable(runs, now, 79);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(79);
    expect(header(lines)).toEqual(expect.arrayContaining(['RUN', 'NAME', 'STATE', 'EXIT', 'PRICE', 'COST', 'AGE']));
    expect(header(lines)).not.toContain('INSTANCE');
    expect(header(lines)).not.toContain('STATUS');
    expect(lines[1]).toContain('llm-finetune-7b-lora');
    expect(lines[1]).toContain('$0.162/h');
    expect(lines[1]).toContain('$12.35');
    expect(lines[1]).toContain('2h 07m');
  });

  it('on a narrower terminal drops more, cuts long names with …, and never drops RUN, NAME, STATE or COST', () => {
    const lines = runsTable(runs, now, 59);
    for (const l of lines.slice(0, 3)) expect(l.length).toBeLessThanOrEqual(59);
    expect(header(lines)).toEqual(expect.arrayContaining(['RUN', 'NAME', 'STATE', 'COST']));
    expect(header(lines)).not.toContain('INSTANCE');
    expect(lines[1]).toMatch(/^g5mtxsduepdq {2}llm-fin/);
  });
});
