import { describe, expect, it } from 'vitest';
import type { AccountSshKey } from '../../../src/client/types.js';
import { PermissionError, ServiceHttpError } from '../../../src/errors.js';
import { createKeyAccess, type KeyAccessClient } from '../../../src/ssh/key-access.js';
import { FakeClock } from '../../helpers/fake-clock.js';

const MINE = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine berth';

function stubClient(keys: AccountSshKey[], opts: { addRefused?: boolean; attachFails?: number } = {}) {
  const calls: string[] = [];
  let attachFails = opts.attachFails ?? 0;
  const client: KeyAccessClient = {
    listSshKeys: () => {
      calls.push('list');
      return Promise.resolve(keys);
    },
    addSshKey: (k) => {
      calls.push(`add ${k}`);
      if (opts.addRefused) return Promise.reject(new PermissionError('user_write'));
      keys.push({ id: 9, key: k, createdAt: null });
      return Promise.resolve();
    },
    attachSshKey: (id, k) => {
      calls.push(`attach ${id} ${k}`);
      if (attachFails-- > 0) return Promise.reject(new ServiceHttpError('server_error', 502, undefined, 'down'));
      return Promise.resolve();
    },
  };
  return { client, calls };
}

describe("berth's public key put where its instances take it from", () => {
  it('adds the key to the account when missing, and attaches it only to instances created before that', async () => {
    const clock = new FakeClock();
    const { client, calls } = stubClient([{ id: 1, key: 'ssh-rsa AAAAother me@laptop', createdAt: null }]);
    const access = createKeyAccess({ client, key: { publicLine: MINE }, clock });
    const old = clock.now() - 3_600_000;
    expect(await access.ensureOnAccount()).toBe('added');
    expect(calls).toEqual(['list', `add ${MINE}`]);
    await clock.advance(120_000);
    expect(await access.prepareInstance(7, clock.now())).toBe('account');
    expect(await access.prepareInstance(8, old)).toBe('attached');
    expect(await access.prepareInstance(8, old)).toBe('attached');
    expect(calls.filter((c) => c.startsWith('attach'))).toEqual([`attach 8 ${MINE}`]);
  });

  it('finds the key already listed (any comment), and adds nothing', async () => {
    const clock = new FakeClock();
    const { client, calls } = stubClient([
      { id: 1, key: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine other-comment', createdAt: clock.now() - 86_400_000 },
    ]);
    const access = createKeyAccess({ client, key: { publicLine: MINE }, clock });
    expect(await access.ensureOnAccount()).toBe('listed');
    expect(calls).toEqual(['list']);
    // Listed a day ago: an instance created an hour ago holds it.
    expect(await access.prepareInstance(5, clock.now() - 3_600_000)).toBe('account');
  });

  it('without user_write, attaches the key to every instance instead', async () => {
    const clock = new FakeClock();
    const { client, calls } = stubClient([], { addRefused: true });
    const access = createKeyAccess({ client, key: { publicLine: MINE }, clock });
    expect(await access.ensureOnAccount()).toBe('not_allowed');
    await clock.advance(600_000);
    expect(await access.prepareInstance(3, clock.now())).toBe('attached');
    expect(calls).toContain(`attach 3 ${MINE}`);
  });

  it('attaches before the account is known to hold the key, and tries a failed attach again', async () => {
    const clock = new FakeClock();
    const { client, calls } = stubClient([], { attachFails: 1 });
    const access = createKeyAccess({ client, key: { publicLine: MINE }, clock });
    await expect(access.prepareInstance(4, clock.now())).rejects.toMatchObject({ code: 'server_error' });
    expect(await access.prepareInstance(4, clock.now())).toBe('attached');
    expect(calls.filter((c) => c.startsWith('attach'))).toHaveLength(2);
  });
});
