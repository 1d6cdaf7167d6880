// `npm run bench [-- --quick] [-- --only sim,client,poller,berth,readiness,scale,sweep,tasks,tasks-ssh,cluster,cli,dashboard,files,names,warm] [-- --notify]`: runs each
// benchmark section, prints it as an aligned table (metric | value | target | met, then the notes),
// and writes the whole report to bench/results/latest.md and latest.json, with how it was run (Node,
// CPU, cores, flags). `scale` is the 1,000-run part of `berth` alone and `sweep` the sweeps at the documented limits (#20) and `tasks` the task end → destroy times (#19) and `tasks-ssh` 100 tasks followed over SSH (#39) and `cluster` several daemons on one Postgres store (#21) (`cluster-shared`: its one-key comparison alone; `cluster-takeover`: its kills alone) and `store-lock` the control API while another program holds berth.db (#38) and `warm` the warm instances' end → next first line and spend (#51), run only when named; `--notify` turns a notification
// target on in it (a receiver in the bench process) and writes latest-notify.md/json instead.
// First, for its side effect: a temp dir of the bench's own (./private-tmp.ts).
import './private-tmp.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { packagePath } from '../src/package-path.js';
import { runBerthBench, runScaleBench } from './berth.js';
import { runCliBench } from './cli.js';
import { runClusterBench } from './cluster.js';
import { runDashboardBench } from './dashboard.js';
import { runFilesBench } from './files.js';
import { runNamesBench } from './names.js';
import { runClientBench } from './client.js';
import { runPollerBench } from './poller.js';
import { runReadinessBench } from './readiness.js';
import { runSimBench } from './sim.js';
import { runStoreLockBench } from './store-lock.js';
import { runSweepBench } from './sweep.js';
import { runSshTasksBench, runTasksBench } from './tasks.js';
import { runWarmBench } from './warm.js';
import type { BenchRow, BenchSection } from './types.js';

const PARTS = ['sim', 'client', 'poller', 'berth', 'readiness', 'cli', 'dashboard', 'files', 'names'] as const;
/** Parts run only when named in --only. */
const EXTRA_PARTS = [
  'scale',
  'sweep',
  'tasks',
  'tasks-ssh',
  'cluster',
  'cluster-shared',
  'cluster-takeover',
  'store-lock',
  'warm',
] as const;
type AnyPart = (typeof PARTS)[number] | (typeof EXTRA_PARTS)[number];

interface Options {
  quick: boolean;
  only: AnyPart[];
  notify: boolean;
}

function parseArgs(argv: string[]): Options {
  const opts: Options = { quick: false, only: [...PARTS], notify: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--quick') opts.quick = true;
    else if (arg === '--notify') opts.notify = true;
    else if (arg === '--only' || arg.startsWith('--only=')) {
      const list = arg.includes('=') ? arg.slice('--only='.length) : (argv[++i] ?? '');
      const names = list
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      const all: readonly string[] = [...PARTS, ...EXTRA_PARTS];
      const bad = names.filter((n) => !all.includes(n));
      if (bad.length || names.length === 0) throw new Error(`--only takes a comma-separated list of ${all.join(', ')}; got "${list}"`);
      opts.only = names as AnyPart[];
    } else throw new Error(`unknown argument ${arg}; usage: bench [--quick] [--only ${[...PARTS, ...EXTRA_PARTS].join(',')}] [--notify]`);
  }
  return opts;
}

function environment(opts: Options, startedAt: Date) {
  const cpu = cpus();
  return {
    date: startedAt.toISOString(),
    command: `node dist/bench/main.js${opts.quick ? ' --quick' : ''}${opts.only.join(',') !== PARTS.join(',') ? ` --only ${opts.only.join(',')}` : ''}${opts.notify ? ' --notify' : ''}`,
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpu: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    memory_gb: Math.round(totalmem() / 2 ** 30),
    quick: opts.quick,
  };
}

/** A section that throws still shows up, as one failed row, so that the other sections are kept. */
async function runPart(part: AnyPart, opts: Options): Promise<BenchSection[]> {
  try {
    switch (part) {
      case 'sim':
        return [await runSimBench()];
      case 'client':
        return [await runClientBench()];
      case 'poller':
        return [await runPollerBench({ quick: opts.quick })];
      case 'berth':
        return await runBerthBench({ quick: opts.quick, notify: opts.notify });
      case 'scale':
        return await runScaleBench({ quick: opts.quick, notify: opts.notify });
      case 'readiness':
        return [await runReadinessBench({ quick: opts.quick })];
      case 'cli':
        return [await runCliBench()];
      case 'dashboard':
        return [await runDashboardBench({ quick: opts.quick })];
      case 'sweep':
        return [await runSweepBench({ quick: opts.quick })];
      case 'tasks':
        return [await runTasksBench({ quick: opts.quick })];
      case 'tasks-ssh':
        return [await runSshTasksBench({ quick: opts.quick })];
      case 'cluster':
        return await runClusterBench({ quick: opts.quick });
      case 'cluster-shared':
        return await runClusterBench({ quick: opts.quick, only: 'shared' });
      case 'cluster-takeover':
        return await runClusterBench({ quick: opts.quick, only: 'takeover' });
      case 'store-lock':
        return [await runStoreLockBench()];
      case 'warm':
        return [await runWarmBench({ quick: opts.quick })];
      case 'files':
        return [await runFilesBench({ quick: opts.quick })];
      case 'names':
        return [await runNamesBench({ quick: opts.quick })];
    }
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return [{ title: part, rows: [{ metric: 'section failed', value: message, met: false }] }];
  }
}

const metText = (row: BenchRow) => (row.met === undefined ? '' : row.met ? 'yes' : 'NO');

function table(section: BenchSection): string {
  const head = ['metric', 'value', 'target', 'met'];
  const body = section.rows.map((r) => [r.metric, r.value, r.target ?? '', metText(r)]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join(' | ')
      .trimEnd();
  const notes = section.rows.filter((r) => r.note).map((r) => `  - ${r.metric}: ${r.note}`);
  return [
    `## ${section.title}`,
    line(head),
    widths.map((w) => '-'.repeat(w)).join('-|-'),
    ...body.map(line),
    ...(notes.length ? ['', 'notes:', ...notes] : []),
  ].join('\n');
}

function markdown(env: ReturnType<typeof environment>, sections: BenchSection[], seconds: number): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const parts = [
    '# berth benchmark',
    '',
    `\`${env.command}\` (after \`npm run build\`) on ${env.date}: Node ${env.node}, ${env.platform}, ${env.cores} × ${env.cpu}, ${env.memory_gb} GB; ${seconds.toFixed(0)} s in all.`,
  ];
  for (const s of sections) {
    parts.push('', `## ${s.title}`, '', '| metric | value | target | met | how it was measured |', '|---|---|---|---|---|');
    for (const r of s.rows)
      parts.push(`| ${cell(r.metric)} | ${cell(r.value)} | ${cell(r.target ?? '')} | ${metText(r)} | ${cell(r.note ?? '')} |`);
  }
  return parts.join('\n') + '\n';
}

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const startedAt = new Date();
  const env = environment(opts, startedAt);
  console.log(`berth benchmark: ${env.command}\nNode ${env.node}, ${env.platform}, ${env.cores} × ${env.cpu}, ${env.memory_gb} GB\n`);
  const sections: BenchSection[] = [];
  for (const part of opts.only) {
    const t0 = performance.now();
    const got = await runPart(part, opts);
    for (const s of got) {
      console.log(table(s));
      console.log('');
    }
    console.log(`(${part}: ${((performance.now() - t0) / 1000).toFixed(0)} s)\n`);
    sections.push(...got);
  }
  const seconds = (Date.now() - startedAt.getTime()) / 1000;
  const dir = packagePath('bench', 'results');
  mkdirSync(dir, { recursive: true });
  // Only the full run (every part of PARTS) is `latest`; a run of some parts goes to a file named
  // after them (latest-sweep, latest-tasks, latest-client...), so that it never replaces the full report.
  const full = opts.only.join(',') === PARTS.join(',');
  const name = opts.notify ? 'latest-notify' : full ? 'latest' : `latest-${opts.only.join('-')}`;
  writeFileSync(join(dir, `${name}.json`), JSON.stringify({ ...env, duration_s: Math.round(seconds), sections }, null, 2) + '\n');
  writeFileSync(join(dir, `${name}.md`), markdown(env, sections, seconds));
  const targets = sections.flatMap((s) => s.rows).filter((r) => r.met !== undefined);
  console.log(
    `${targets.filter((r) => r.met).length} of ${targets.length} targets met; ${seconds.toFixed(0)} s; written to ${join(dir, `${name}.md`)} and ${name}.json`,
  );
  return sections.some((s) => s.rows.some((r) => r.metric === 'section failed')) ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 2;
  },
);
