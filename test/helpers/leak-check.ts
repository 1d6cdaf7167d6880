// Set up before every test file (vitest.config.ts setupFiles): fails a file that leaves behind a
// listening server, a running child process, a pending timer, or a temp dir. Like
// graphile-worker's suite, which fails a test that leaks a worker: a leak in a test is usually a
// leak, or a missing await, in the code under test.
//
// - Servers and child processes: counted by kind with process.getActiveResourcesInfo(), before the
//   file's first hook and after its last (vitest itself holds none of these).
// - Timers: vitest's own come and go, so the count cannot tell; instead setTimeout and setInterval
//   are wrapped here (vitest keeps its own references to the originals), and a timer the file's
//   code made that is still pending and keeps the process alive (ref'd) at the end is a leak.
// - Temp dirs: the file gets a TMPDIR of its own (os.tmpdir() reads it, and spawned processes
//   inherit it), which must be empty at the end; it is then removed. CHAOS_KEEP=1 keeps it.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

/** Kinds of resources a test must not leave: servers and child processes. */
const WATCHED = new Set(['TCPServerWrap', 'PipeServerWrap', 'ProcessWrap']);
/** How long a resource may take to go after the file's own cleanup (a close callback, an exit event). */
const GRACE_MS = 2_000;

const fileTmp = mkdtempSync(join(tmpdir(), 'berth-test-'));
process.env.TMPDIR = fileTmp;

const realSetTimeout = globalThis.setTimeout;
const realSetInterval = globalThis.setInterval;
const realClearTimeout = globalThis.clearTimeout;
const realClearInterval = globalThis.clearInterval;
/** Timers made by the file's code and not yet fired or cleared, with where they were made. */
const timers = new Map<NodeJS.Timeout, Error>();
/** Where a timer was made (V8 formats the stack only if it is read). */
const origin = () => new Error('timer made here');
const where = (e: Error) =>
  e.stack
    ?.split('\n')
    .slice(3, 6)
    .map((l) => l.trim())
    .join(' < ') ?? '';

globalThis.setTimeout = Object.assign(
  function setTimeout(fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) {
    const t: NodeJS.Timeout = realSetTimeout(
      (...a: unknown[]) => {
        timers.delete(t);
        fn(...a);
      },
      ms,
      ...args,
    );
    timers.set(t, origin());
    return t;
  },
  { __promisify__: (realSetTimeout as unknown as { __promisify__: unknown }).__promisify__ },
) as unknown as typeof globalThis.setTimeout;
globalThis.setInterval = function setInterval(fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) {
  const t = realSetInterval(fn, ms, ...args);
  timers.set(t, origin());
  return t;
} as typeof globalThis.setInterval;
globalThis.clearTimeout = function clearTimeout(t: Parameters<typeof realClearTimeout>[0]) {
  if (t && typeof t === 'object') timers.delete(t as NodeJS.Timeout);
  realClearTimeout(t);
} as typeof globalThis.clearTimeout;
globalThis.clearInterval = function clearInterval(t: Parameters<typeof realClearInterval>[0]) {
  if (t && typeof t === 'object') timers.delete(t as NodeJS.Timeout);
  realClearInterval(t);
} as typeof globalThis.clearInterval;

function watchedCounts(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) if (WATCHED.has(kind)) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

function leaks(before: Map<string, number>): string[] {
  const out: string[] = [];
  for (const [kind, n] of watchedCounts()) if (n > (before.get(kind) ?? 0)) out.push(`${n - (before.get(kind) ?? 0)} × ${kind}`);
  const pending = [...timers].filter(([t]) => t.hasRef());
  if (pending.length > 0) out.push(`${pending.length} × timer (first made ${where(pending[0]![1])})`);
  return out;
}

let before = new Map<string, number>();
beforeAll(() => {
  before = watchedCounts();
});

afterAll(async () => {
  const problems: string[] = [];
  let left = leaks(before);
  for (const end = Date.now() + GRACE_MS; left.length > 0 && Date.now() < end; left = leaks(before)) {
    await new Promise((resolve) => realSetTimeout(resolve, 20));
  }
  if (left.length > 0) problems.push(`left running: ${left.join(', ')}`);
  if (!process.env.CHAOS_KEEP) {
    const files = readdirSync(fileTmp);
    rmSync(fileTmp, { recursive: true, force: true });
    if (files.length > 0) problems.push(`left in the temp dir: ${files.slice(0, 5).join(', ')}${files.length > 5 ? ', ...' : ''}`);
  }
  if (problems.length > 0) throw new Error(`This test file does not clean up after itself: ${problems.join('; ')}.`);
});
