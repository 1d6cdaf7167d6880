// The words of the CLI's run views: a total that counts its runs in English, an ended run that
// never rented said so, and a run's end as a sentence ("succeeded", not "is succeeded").
import { describe, expect, it } from 'vitest';
import { endedWords, runDetail, runEndedSentence, runsTable } from '../../../src/cli/render.js';
import type { Run } from '../../../src/wire/control-api.js';

const at = '2026-11-22T12:00:00.000Z';

function run(id: string, state: Run['state']): Run {
  return {
    id,
    name: 'job',
    state,
    gpu: null,
    gpu_rented: false,
    task: false,
    created_at: at,
    updated_at: at,
    attempt: 0,
    relax_level: 0,
    instance: null,
    attempts: [],
    error: null,
    held: false,
    unreadable: null,
    cost: { usd: 0.0072, usd_per_hour: 0 },
    outputs: [],
    outputs_missing: null,
  } as Run;
}

describe('words of the run views', () => {
  it('counts the runs of the total line in words', () => {
    expect(runsTable([run('a', 'running')], Date.parse(at)).at(-1)).toBe('Total: $0.0072 spent by this run; $0.0000/h billing now.');
    expect(runsTable([run('a', 'running'), run('b', 'failed')], Date.parse(at)).at(-1)).toMatch(/spent by these 2 runs;/);
  });

  it('says an ended run that never rented has no attempts, not "none yet"', () => {
    expect(runDetail(run('a', 'cancelled'), Date.parse(at))).toContain('Attempts: none (it ended before it rented an instance)');
    expect(runDetail(run('a', 'searching'), Date.parse(at))).toContain('Attempts: none yet');
  });

  it("lists a task's outputs with their sizes, marks a partial file, and says how to copy them (issue #40)", () => {
    const r = {
      ...run('a', 'succeeded'),
      outputs: [
        {
          attempt: 1,
          state: 'partial' as const,
          host: 'box1',
          bytes: 1_048_576,
          detail: 'files.outputs_max_mb reached',
          started_at: at,
          ended_at: at,
          files: [
            { path: '/root/workdir/out/model.bin', name: 'out/model.bin', size: 786_432, sha256: 'ab'.repeat(32) },
            { path: '/root/workdir/out/b.bin', name: 'out/b.bin', size: 262_144, sha256: 'cd'.repeat(32), partial: true as const },
          ],
        },
      ],
    };
    const text = runDetail(r, Date.parse(at)).join('\n');
    expect(text).toContain('Outputs of attempt 1: partial, 2 files, 1048576 bytes on box1');
    expect(text).toMatch(/out\/model\.bin\s+786432\s+abababababababab/);
    expect(text).toMatch(/out\/b\.bin \(partial\)\s+262144/);
    expect(text).toContain('berth outputs a DEST copies them out');
  });

  it('says how a run ended as a sentence', () => {
    expect(runEndedSentence(run('a', 'succeeded'))).toBe('Run a succeeded.');
    expect(runEndedSentence(run('a', 'cancelled'))).toBe('Run a was cancelled.');
    expect(endedWords('running')).toBe('is running');
  });
});
