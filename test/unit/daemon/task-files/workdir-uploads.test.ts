// The workdir uploads' rounds on a fake clock, their login a stub (issue #48 item 6): an upload
// refused for good (the key refused by the host) is said once and gives the attempt up at once, so
// its instance does not bill until the wrapper's files.upload_timeout_s; a dropped login is tried
// again and gives nothing up.
import { afterEach, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/logger.js';
import { WorkdirUploads } from '../../../../src/daemon/task-files/workdir-uploads.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const target = { runId: 'r1', n: 1, instanceId: 42 };
let uploads: WorkdirUploads | undefined;
afterEach(() => uploads?.stop());

function world(loginError: string) {
  const clock = new FakeClock();
  const said: Array<{ type: string; message: string }> = [];
  const givenUp: string[] = [];
  let logins = 0;
  uploads = new WorkdirUploads({
    clock,
    log: silentLogger(),
    targets: () => [target],
    workdirOf: () => ({ sha256: 'ab'.repeat(32), dir: '/root/workdir' }),
    archive: () => Buffer.from('tar'),
    login: () => {
      logins++;
      return Promise.reject(Object.assign(new Error(`login: ${loginError}`), { code: loginError }));
    },
    say: (_t, type, message) => said.push({ type, message }),
    givenUp: (t, why) => givenUp.push(`${t.runId}#${t.n}: ${why}`),
    timeoutMs: 600_000,
  });
  uploads.start();
  return { clock, said, givenUp, logins: () => logins };
}

it('an upload whose key the host refuses gives the attempt up at once, said once, and is not tried again', async () => {
  const w = world('ssh_auth_refused');
  await w.clock.advance(10_000);
  expect(w.givenUp).toEqual(['r1#1: ssh_auth_refused']);
  expect(w.said).toEqual([
    {
      type: 'workdir.upload_failed',
      message:
        'attempt #1: the workdir cannot reach instance 42 (ssh_auth_refused); its task will not start, so the instance is given up now and the run fails over',
    },
  ]);
  expect(w.logins()).toBe(1);
});

it('a dropped login is tried again with backoff and gives nothing up', async () => {
  const w = world('ssh_dropped');
  await w.clock.advance(10_000);
  expect(w.logins()).toBeGreaterThan(2);
  expect(w.givenUp).toEqual([]);
  expect(w.said).toEqual([]);
});
