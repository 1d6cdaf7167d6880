// GPU memory the way people say it (issue #50): a figure in GB matched against how cards list
// themselves (MiB), never below what was asked, and the warning for an MB bound that leaves out the
// card the user likely meant.
import { describe, expect, it } from 'vitest';
import { gbListing, gbOf, gpuMemoryInMb, gpuMemorySpecWarnings } from '../../../src/job-spec/gpu-memory.js';
import { buildSearchQuery } from '../../../src/job-spec/search-query.js';
import { planRun } from '../../../src/job-spec/run-plan.js';
import { parseJobSpec } from '../../../src/job-spec/validate.js';
import { loadConfig } from '../../../src/config/load.js';
import { type SpecError } from '../../../src/errors.js';

/** How the simulator's catalog lists each card (src/sim/catalog.ts), with the size it is sold as. */
const CARDS = [
  { name: 'Tesla T4', soldGb: 16, listsMb: 15360 },
  { name: 'RTX 4090', soldGb: 24, listsMb: 24564 },
  { name: 'RTX 3090', soldGb: 24, listsMb: 24576 },
  { name: 'RTX A6000', soldGb: 48, listsMb: 49140 },
  { name: 'L40S', soldGb: 48, listsMb: 46068 },
  { name: 'A100 PCIE', soldGb: 40, listsMb: 40960 },
  { name: 'A100 SXM4', soldGb: 80, listsMb: 81920 },
  { name: 'H100 SXM', soldGb: 80, listsMb: 81559 },
  { name: 'H100 NVL', soldGb: 94, listsMb: 95830 },
  { name: 'H200', soldGb: 141, listsMb: 143771 },
];

const passes = (ops: Record<string, unknown>, mb: number) =>
  Object.entries(ops).every(([op, v]) => {
    const b = v as number;
    return op === 'gte' ? mb >= b : op === 'gt' ? mb > b : op === 'lte' ? mb <= b : op === 'lt' ? mb < b : mb === b;
  });

describe('a figure in GB', () => {
  it('reads "16GB", "16 GB", "16gb" and "24.5GB"; nothing else', () => {
    expect(['16GB', '16 GB', ' 16gb ', '24.5GB'].map(gbOf)).toEqual([16, 16, 16, 24.5]);
    expect(['16', '16GiB', '16 G', 'GB', '0GB', '-4GB', 16].map(gbOf)).toEqual([null, null, null, null, null, null, null]);
  });

  it('names the listings of a card sold at that size: at least N x 10^9 bytes, at most N GiB', () => {
    expect(gbListing(16)).toEqual({ low: 15259, high: 16384 });
    expect(gbListing(24)).toEqual({ low: 22889, high: 24576 });
  });

  it.each(CARDS)('$name, sold as $soldGb GB and listing $listsMb MB, counts as $soldGb GB', ({ soldGb, listsMb }) => {
    expect(passes(gpuMemoryInMb({ gte: `${soldGb}GB` }), listsMb)).toBe(true);
    expect(passes(gpuMemoryInMb({ lte: `${soldGb}GB` }), listsMb)).toBe(true);
    expect(passes(gpuMemoryInMb({ eq: `${soldGb}GB` }), listsMb)).toBe(true);
    expect(passes(gpuMemoryInMb({ gt: `${soldGb}GB` }), listsMb)).toBe(false);
    expect(passes(gpuMemoryInMb({ lt: `${soldGb}GB` }), listsMb)).toBe(false);
  });

  it('never counts a card with less memory than was asked: the floor is N x 10^9 bytes, and a 12 GB card stays out of 16', () => {
    for (const gb of [8, 12, 16, 24, 40, 48, 80, 141]) {
      const { gte } = gpuMemoryInMb({ gte: `${gb}GB` }) as { gte: number };
      expect(gte * 2 ** 20).toBeGreaterThanOrEqual(gb * 1e9);
    }
    expect(passes(gpuMemoryInMb({ gte: '16GB' }), 12288)).toBe(false);
    expect(passes(gpuMemoryInMb({ gte: '48GB' }), 40960)).toBe(false);
  });

  it('keeps MB figures as they are and the tighter of two bounds', () => {
    expect(gpuMemoryInMb({ gte: 20000, lte: '24GB' })).toEqual({ gte: 20000, lte: 24576 });
    expect(gpuMemoryInMb({ gte: 16000, eq: '16GB' })).toEqual({ gte: 16000, lte: 16384 });
    expect(gpuMemoryInMb({ in: [15360, 24576] })).toEqual({ in: [15360, 24576] });
  });
});

describe('in a job spec', () => {
  const spec = (filters: Record<string, unknown>, relax: unknown[] = []) => ({
    name: 'gb',
    image: 'pytorch/pytorch',
    max_price_per_hour: 1,
    search: { filters },
    relax,
  });
  const issues = (s: unknown) => {
    try {
      parseJobSpec(s);
      return [];
    } catch (err) {
      return (err as SpecError).issues;
    }
  };

  it('the search and its relax steps send the MB the service compares', () => {
    const plan = planRun(
      parseJobSpec(spec({ gpu_ram: { gte: '16GB' } }, [{ set: { gpu_total_ram: { gte: '32GB' } } }])),
      loadConfig({}, {}).config.runs,
    );
    const none = { offerIds: [], machineIds: [] };
    expect(buildSearchQuery(plan, 0, none)['gpu_ram']).toEqual({ gte: 15259 });
    expect(buildSearchQuery(plan, 1, none)['gpu_total_ram']).toEqual({ gte: 30518 });
  });

  it('refuses a figure that is not in GB, GB on a field that is not GPU memory, and GB where a range cannot be said', () => {
    expect(issues(spec({ gpu_ram: { gte: '16GiB' } }))).toEqual([
      { path: '$.search.filters.gpu_ram.gte', message: 'expected a number (MB) or a figure in GB such as "16GB", got "16GiB"' },
    ]);
    expect(issues(spec({ cpu_ram: { gte: '16GB' } }))).toEqual([
      { path: '$.search.filters.cpu_ram.gte', message: 'expected a number, got string' },
    ]);
    expect(issues(spec({ gpu_ram: { in: ['16GB'] } }))[0]).toMatchObject({
      path: '$.search.filters.gpu_ram.in[0]',
      message: expect.stringMatching(/MB figures only/),
    });
    expect(issues(spec({ gpu_ram: { gte: '16GB', lte: '24GB' } }))).toEqual([]);
  });

  it('validate warns when an MB bound leaves out the cards of the size it names, and says how to ask', () => {
    const warned = gpuMemorySpecWarnings(parseJobSpec(spec({ gpu_ram: { gte: 16000 } }, [{ set: { gpu_ram: { lte: 24000 } } }])));
    expect(warned).toEqual([
      'search.filters.gpu_ram.gte: 16000 MB leaves out cards sold as 16 GB, which list from 15259 MB (a Tesla T4 lists 15360); write gte: "16GB" to count them (docs/job-spec.md, "GPU memory")',
      'relax[0].set.gpu_ram.lte: 24000 MB leaves out cards sold as 24 GB, which list up to 24576 MB; write lte: "24GB" to count them (docs/job-spec.md, "GPU memory")',
    ]);
    // 16384 (16 GiB) leaves the T4 out too; a figure copied from a listing (15360 is 15 x 1024), and one in GB, are not warned of.
    expect(gpuMemorySpecWarnings(parseJobSpec(spec({ gpu_ram: { gte: 16384 } })))).toHaveLength(1);
    expect(gpuMemorySpecWarnings(parseJobSpec(spec({ gpu_ram: { gte: 15360 }, gpu_total_ram: { gte: '32GB' } })))).toEqual([]);
  });
});
