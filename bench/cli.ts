// The CLI section of `npm run bench`: wall time of `berth --version` and of `berth status` against
// a running daemon (a few runs in its store), next to a bare `node -e 0`, median of 10 each,
// interleaved so that a slow spell of the machine hits all three alike. The goal (issue #10): each
// within 2.5× of node's own start, so that `watch berth status` and scripts feel instant.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimulator } from '../src/sim/index.js';
import { packagePath } from '../src/package-path.js';
import { spawnDaemon } from './measure-daemon.js';
import { median, type BenchRow, type BenchSection } from './types.js';

const SAMPLES = 10;
const TARGET_RATIO = 2.5;

/** Wall ms of one process from spawn to exit; throws if it failed. */
function timed(args: string[], env: NodeJS.ProcessEnv): number {
  const t0 = performance.now();
  const res = spawnSync(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const ms = performance.now() - t0;
  if (res.status !== 0) throw new Error(`${args.join(' ')} exited ${res.status}: ${res.stderr.toString().slice(0, 300)}`);
  return ms;
}

export async function runCliBench(): Promise<BenchSection> {
  const sim = await startSimulator({ seed: 5, config: { time_scale: 30 } });
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-cli-'));
  const daemon = await spawnDaemon(home, sim.url, sim.apiKey, { daemon: { listen: '127.0.0.1:0' } });
  try {
    for (let i = 0; i < 3; i++) {
      await daemon.api('POST', '/v1/runs', { name: `cli-${i}`, image: 'img', max_price_per_hour: 0.5 });
    }
    const env = { ...process.env, BERTH_HOME: home };
    const berth = packagePath('bin', 'berth.js');
    const commands = { node: ['-e', '0'], version: [berth, '--version'], status: [berth, 'status'] } as const;
    const samples: Record<keyof typeof commands, number[]> = { node: [], version: [], status: [] };
    for (const args of Object.values(commands)) timed([...args], env); // warm the file cache
    for (let i = 0; i < SAMPLES; i++) {
      for (const [name, args] of Object.entries(commands)) samples[name as keyof typeof commands].push(timed([...args], env));
    }
    const base = median(samples.node);
    const row = (name: 'version' | 'status', label: string, note: string): BenchRow => {
      const ms = median(samples[name]);
      return {
        metric: label,
        value: `${ms.toFixed(0)} ms · ${(ms / base).toFixed(2)}× node -e 0`,
        target: `<= ${TARGET_RATIO}× node -e 0 (${(base * TARGET_RATIO).toFixed(0)} ms)`,
        met: ms <= base * TARGET_RATIO,
        note,
      };
    };
    return {
      title: 'CLI start-up: wall time, median of 10',
      rows: [
        { metric: 'node -e 0', value: `${base.toFixed(0)} ms`, note: `the same Node (${process.version}), spawned the same way` },
        row('version', 'berth --version', 'loads commander and the CLI entry only: each command imports its code when it runs'),
        row(
          'status',
          'berth status (running daemon, 3 runs)',
          'reads daemon.json and control.token, checks the proof, GET /v1/runs over node:http, prints the table; no undici, zod, pino, xstate or SQLite',
        ),
      ],
    };
  } finally {
    await daemon.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}
