// A followed task's output, live (issue #39 item 2): a spawned daemon follows a task over SSH on the
// simulator's real sshd, and its lines reach `berth logs RUN --follow` and the run's event stream
// (`output=1`) while the task still runs, every secret scrubbed, and bounded when the task prints
// megabytes. Order, not time, is what the tests prove: the task waits for a file the test writes
// only once it has seen the line before it.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { Run as RunView, StreamOutput } from '../../src/wire/control-api.js';
import { userEnv } from '../helpers/berth-cli.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { spawnBerth } from '../helpers/spawned-berth.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { openSse, type SseClient } from '../helpers/sse.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();
const SECRET = 'hf_correcthorsebatterystaple42';

let goDir: string | undefined;
let sse: SseClient | undefined;
afterEach(() => {
  sse?.close();
  if (goDir) rmSync(goDir, { recursive: true, force: true });
  sse = goDir = undefined;
});

/** A simulator whose instances run an sshd that takes berth's key (on the account), and a daemon. */
async function start(): Promise<{ home: string; daemon: DaemonProcess; sim: Awaited<ReturnType<typeof world.sim>> }> {
  const { home, sim, daemon } = await world.sshWorld({ seed: 14, onstartTimeoutS: 90, homePrefix: 'berth-live-' });
  // The files the tasks wait for: in a directory every user can reach (the simulator runs tasks
  // unprivileged, and the test file's own TMPDIR is private).
  goDir = mkdtempSync('/tmp/berth-live-go-');
  chmodSync(goDir, 0o755);
  return { home, daemon, sim };
}

const outputsOf = (c: SseClient): StreamOutput[] =>
  c.messages.filter((m) => m.event === 'output').map((m) => JSON.parse(m.data) as StreamOutput);

it('a followed task: each line reaches `berth logs --follow` and the event stream while the task runs, secrets scrubbed', async () => {
  const { home, daemon } = await start();
  const go = (k: number) => join(goDir!, `go${k}`);
  // Round k: a line, then the task waits until the test has seen it (it writes go<k>); then a burst
  // of 2000 lines, more than --tail 5 or the kept 4 KB tail hold, each of which must come by the stream.
  const spec = jobSpec({
    ready_when: 'status',
    secrets: { HF_TOKEN: SECRET },
    run:
      `echo "token $HF_TOKEN"; ` +
      `for k in 1 2 3; do echo "round $k"; while [ ! -e ${goDir}/go$k ]; do sleep 0.1; done; done; ` +
      `i=0; while [ $i -lt 2000 ]; do echo "burst $i"; i=$((i+1)); done; ` +
      `echo "burst over"; while [ ! -e ${goDir}/go4 ]; do sleep 0.1; done; echo "last line"`,
  });
  const created = await daemon.api<RunView>('POST', '/v1/runs', spec);
  expect(created.status).toBe(201);
  const runId = created.body.id;
  sse = await openSse(`${daemon.url}/v1/events/stream?run=${runId}&output=1`, { authorization: `Bearer ${daemon.token}` });
  const cli = spawnBerth(['logs', runId, '--follow', '--tail', '5'], userEnv(home));
  for (const k of [1, 2, 3]) {
    // The task goes on only once the line it printed before waiting has reached the CLI.
    await cli.until(`round ${k}\n`);
    writeFileSync(go(k), '');
  }
  await cli.until('burst over\n');
  await sse.until((ms) => ms.some((m) => m.event === 'output' && m.data.includes('burst over')), 30_000);
  writeFileSync(go(4), '');
  expect(await cli.exited).toBe(0);

  const printed = cli.stdout.split('\n');
  // Every line of the burst, once and in order, though --tail 5 and the kept tail hold far fewer.
  const burst = printed.filter((l) => l.startsWith('burst '));
  expect(burst).toEqual([...Array.from({ length: 2000 }, (_, i) => `burst ${i}`), 'burst over']);
  expect(printed.indexOf('round 1')).toBeLessThan(printed.indexOf('round 2'));
  expect(printed.indexOf('round 3')).toBeLessThan(printed.indexOf('burst 0'));
  expect(printed).toContain('last line');
  expect(cli.stdout).toMatch(/berth-task-end run=\S+ attempt=1 exit=0/);
  expect(cli.stderr).not.toMatch(/some lines were left out|some may be missing/);
  expect(cli.stdout).toContain('token [redacted]');

  // The event stream carried the same lines, scrubbed too; its events still come with their ids.
  const lines = outputsOf(sse).flatMap((o) => o.lines);
  expect(lines).toContain('token [redacted]');
  expect(lines).toContain('round 3');
  expect(lines.filter((l) => l.startsWith('burst '))).toHaveLength(2001);
  const done = await daemon.waitFor(runId, isEnded, 30_000);
  expect(done.state).toBe('succeeded');
  for (const text of [cli.stdout, cli.stderr, JSON.stringify(sse.messages)]) expect(text).not.toContain(SECRET);
  expect(sse.messages.filter((m) => m.event === 'message').every((m) => m.id !== undefined)).toBe(true);
}, 120_000);

it('megabytes of output stay bounded: the stream leaves lines out and says so, lines are cut, the store keeps 4 KB', async () => {
  const { daemon } = await start();
  // 8 MB of 200-character lines as fast as the task can write them, and one line of 100 KB.
  const spec = jobSpec({
    ready_when: 'status',
    run:
      `head -c 100000 /dev/zero | tr '\\0' x; echo; ` +
      `line=$(head -c 199 /dev/zero | tr '\\0' y); ` +
      `i=0; while [ $i -lt 40 ]; do j=0; while [ $j -lt 1000 ]; do echo "$line"; j=$((j+1)); done; i=$((i+1)); done; ` +
      // A pause first: its own batch, once the stream's rate allows again.
      `sleep 1; echo "flood over"; while [ ! -e ${goDir}/go ]; do sleep 0.1; done`,
  });
  const created = await daemon.api<RunView>('POST', '/v1/runs', spec);
  const runId = created.body.id;
  sse = await openSse(`${daemon.url}/v1/events/stream?run=${runId}&output=1`, { authorization: `Bearer ${daemon.token}` });
  await sse.until((ms) => ms.some((m) => m.event === 'output' && m.data.includes('flood over')), 60_000);
  writeFileSync(join(goDir!, 'go'), '');
  const done = await daemon.waitFor(runId, isEnded, 60_000);
  expect(done.state).toBe('succeeded');

  const outputs = outputsOf(sse);
  const sent = outputs.flatMap((o) => o.lines);
  const leftOut = outputs.reduce((n, o) => n + o.left_out, 0);
  // 40,000 lines of 200 characters were printed: the stream sent a bounded part and counted the rest.
  expect(sent.length + leftOut).toBeGreaterThanOrEqual(40_000);
  expect(leftOut).toBeGreaterThan(0);
  expect(sent.reduce((n, l) => n + l.length, 0)).toBeLessThan(8_000_000 / 4);
  // The 100 KB line, cut.
  expect(Math.max(...sent.map((l) => l.length))).toBeLessThanOrEqual(4096 + 2);
  // The store keeps the attempt's last 4 KB, the end marker last.
  expect(done.attempts[0]!.logs!.length).toBeLessThanOrEqual(4200);
  expect(done.attempts[0]!.logs).toMatch(/flood over\n\nberth-task-end run=\S+ attempt=1 exit=0$/);
}, 120_000);
