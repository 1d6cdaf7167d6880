// vitest globalSetup: one real Postgres server for the whole run (./pg-instance.ts), on a free port
// with its data in a temp dir, stopped and removed afterwards. Test files make a database of their
// own on it (./pg-database.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startPgInstance } from './pg-instance.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A superuser URL of the run's Postgres server (database `postgres`). */
    pgAdminUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-pg-'));
  let server;
  try {
    server = await startPgInstance(dir, 'berth-test');
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  project.provide('pgAdminUrl', server.adminUrl);
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
