// Errors the operating system gives a command (a port another program holds, a file that is not
// there) are the user's to fix: one sentence on stderr and exit 2, never "a bug in berth" and exit 1.
// Real processes, as a user runs them.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, userEnv } from '../helpers/berth-cli.js';

let taken: Server;
let port: number;
let home: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'berth-syserr-'));
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  port = (taken.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => taken.close(() => resolve()));
  rmSync(home, { recursive: true, force: true });
});

function oneSentence(stderr: string): string {
  const lines = stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(stderr).not.toMatch(/a bug in berth|Unexpected error|EADDRINUSE:/);
  return lines[0]!;
}

describe('a port another program holds', () => {
  it('berth simulate says the port is taken and exits 2', async () => {
    const r = await berth(['simulate', '--port', String(port)], userEnv(home));
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(oneSentence(r.stderr)).toBe(
      `Cannot listen on 127.0.0.1:${port} because another program already listens there; pick another port, or stop that program.`,
    );
  });

  it('berth daemon says so too and exits 2', async () => {
    const r = await berth(
      ['daemon', '--listen', `127.0.0.1:${port}`],
      userEnv(home, { BERTH_API_KEY: 'k', BERTH_API_URL: 'http://127.0.0.1:9' }),
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`127.0.0.1:${port}`);
    expect(r.stderr).not.toMatch(/a bug in berth|Unexpected error/);
  });
});

describe('files', () => {
  it('a simulator config that is not there: one sentence, exit 2', async () => {
    const r = await berth(['simulate', '--port', '0', '--config', join(home, 'nope.json')], userEnv(home));
    expect(r.code).toBe(2);
    expect(oneSentence(r.stderr)).toContain('nope.json');
  });
});
