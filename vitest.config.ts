import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Fails a test file that leaves a server, a child process, a timer or a temp dir behind.
    setupFiles: ['test/helpers/leak-check.ts'],
    // One real Postgres server for the run (the Postgres store's tests); each file makes its own database.
    globalSetup: ['test/helpers/pg-server.ts'],
    // better-sqlite3 is a native addon: stay on child processes, not worker threads.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // End-to-end and chaos files spawn real daemons; keep file-level parallelism to the 2 cores.
    maxWorkers: 2,
  },
});
