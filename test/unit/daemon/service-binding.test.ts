// The account confirmed at start (src/daemon/service-binding.ts): a store that does not answer
// just after the account was read (a Postgres server restarting) is waited out, not an exit 2
// (chaos-pg, seed 184132459); another account with live runs is still refused. Fake clock.
import { describe, expect, it } from 'vitest';
import { ConfigError, StoreWriteError } from '../../../src/errors.js';
import { confirmAccount } from '../../../src/daemon/service-binding.js';
import { silentLogger } from '../../../src/logger.js';
import type { ServiceBinding } from '../../../src/store/index.js';
import { FakeClock } from '../../helpers/fake-clock.js';

function binding(failures: number) {
  const saved: ServiceBinding[] = [];
  let left = failures;
  return {
    saved,
    store: {
      binding: {
        load: (): ServiceBinding | undefined => {
          if (left-- > 0) throw new StoreWriteError('ECONNREFUSED');
          return saved.at(-1);
        },
        save: (b: ServiceBinding) => void saved.push(b),
      },
    },
  };
}

describe('confirmAccount', () => {
  it('waits out a store that does not answer after the account was read, then records the account', async () => {
    const clock = new FakeClock(0);
    const { store, saved } = binding(2);
    const done = confirmAccount(
      { baseUrl: 'http://sim', confirm: 7, live: 1 },
      { store, currentUser: async () => ({ id: 7 }) as never, clock, log: silentLogger(), signal: new AbortController().signal },
    );
    let settled = false;
    void done.then(() => (settled = true));
    await clock.advance(100);
    expect(settled).toBe(false);
    await clock.advance(1_000);
    await done;
    expect(saved).toEqual([{ base_url: 'http://sim', account_id: 7, at: expect.any(Number) }]);
  });

  it('refuses another account while runs are live, before touching the store', async () => {
    const clock = new FakeClock(0);
    const { store, saved } = binding(5);
    await expect(
      confirmAccount(
        { baseUrl: 'http://sim', confirm: 7, live: 2 },
        { store, currentUser: async () => ({ id: 8 }) as never, clock, log: silentLogger(), signal: new AbortController().signal },
      ),
    ).rejects.toBeInstanceOf(ConfigError);
    expect(saved).toEqual([]);
  });
});
