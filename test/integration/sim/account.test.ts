// The account as berth's money guard reads it: users/current's balance and credit drawn down by the
// ledger from the configured credit (and topped up by the admin route), and `ssh_key` empty until
// the account has an SSH key.
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, startTestSim } from './helpers.js';

const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBerthSimTestKey berth@test';
const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

async function fresh(options: Parameters<typeof startTestSim>[0]) {
  const sim = await startTestSim(options);
  sims.push(sim);
  return sim;
}

const user = async (sim: RunningSimulator) => (await call(sim, 'GET', '/api/v0/users/current/')).body;

describe('users/current', () => {
  test('balance and credit are the starting credit less what the ledger billed, plus top-ups', async () => {
    let now = 1_000_000;
    const sim = await fresh({
      timeScale: 1,
      now: () => now,
      config: { account: { credit: 20 }, lifecycle: { provision_s: 0, boot_s: { min: 0, max: 0 } } },
    });
    expect(await user(sim)).toMatchObject({ balance: 20, credit: 20 });
    await call(sim, 'PUT', `/api/v0/asks/${sim.offers()[0]!.id}/`, { image: 'x', disk: 20 });
    now += 10 * 3600_000;
    const billed = sim.ledger().total_usd;
    expect(billed).toBeGreaterThan(0.5);
    const u = await user(sim);
    expect(u.balance).toBeCloseTo(20 - billed, 2);
    expect(u.credit).toBe(u.balance);
    expect((await call(sim, 'POST', '/_sim/account/credit', { add_usd: 5 })).body.credit).toBeCloseTo(25 - billed, 9);
    expect((await user(sim)).balance).toBeCloseTo(25 - billed, 2);
    expect(sim.addCredit(-30)).toBeCloseTo(-5 - billed, 9);
    expect((await call(sim, 'POST', '/_sim/account/credit', { add_usd: 'lots' })).body.error).toBe('invalid_args');
  });

  test('ssh_key is empty without a key; a key configured at start or added shows; deleting the last empties it', async () => {
    const bare = await fresh({});
    expect((await user(bare)).ssh_key).toBe('');
    const vm = await call(bare, 'PUT', `/api/v0/asks/${bare.offers()[0]!.id}/`, { image: 'x', vm: true });
    expect(vm.body.error).toBe('no_ssh_key_for_vm');

    const keyed = await fresh({ config: { account: { ssh_keys: [KEY] } } });
    expect((await user(keyed)).ssh_key).toBe(KEY);
    const [listed] = (await call(keyed, 'GET', '/api/v0/ssh/')).body;
    expect(listed).toMatchObject({ key: KEY });
    expect((await call(keyed, 'PUT', `/api/v0/asks/${keyed.offers()[0]!.id}/`, { image: 'x', vm: true })).status).toBe(200);
    expect((await call(keyed, 'DELETE', `/api/v0/ssh/${listed.id}/`)).body).toEqual({ success: true });
    expect((await user(keyed)).ssh_key).toBe('');
  });

  test('a config ssh key that is not an OpenSSH public key is refused', async () => {
    await expect(startTestSim({ config: { account: { ssh_keys: ['not a key'] } } })).rejects.toThrow(/account\.ssh_keys\.0/);
  });
});
