// Create (create_instance.yaml): every documented input limit with its 400 body, the offer's 403
// fault, cancel_unavail, target_state, templates, and the price an instance is billed.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, startTestSim } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startTestSim({ seed: 11 });
});
afterAll(() => sim.close());

let next = 0;
/** A fresh offer for each create, so a test never meets its own rented offer. */
const freshOffer = () => sim.offers()[next++]!;
const create = (body: unknown, offerId = freshOffer().id) => call(sim, 'PUT', `/api/v0/asks/${offerId}/`, body);

describe('documented input limits', () => {
  const env = (n: number, len: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`K${i}`, 'v'.repeat(len)]));
  const refused: Array<[string, Record<string, unknown>, string]> = [
    ['image over 1024', { image: 'i'.repeat(1025) }, 'invalid_args'],
    ['no image', { disk: 10 }, 'invalid_args'],
    ['label over 256', { image: 'x', label: 'l'.repeat(257) }, 'invalid_args'],
    ['an env value over 256', { image: 'x', env: { A: 'v'.repeat(257) } }, 'invalid_args'],
    ['env over 32768 in all', { image: 'x', env: env(130, 256) }, 'invalid_args'],
    ['env value not a string', { image: 'x', env: { A: 1 } }, 'invalid_args'],
    ['env string not Docker flags', { image: 'x', env: 'A=1' }, 'invalid_args'],
    ['disk under 8 GB', { image: 'x', disk: 7.9 }, 'invalid_args'],
    ['onstart over 4048', { image: 'x', onstart: 'o'.repeat(4049) }, 'invalid_args'],
    ['args and onstart over 4096', { image: 'x', onstart: 'o'.repeat(4000), args: ['a'.repeat(97)] }, 'invalid_args'],
    ['args_str and onstart over 4096', { image: 'x', onstart: 'o'.repeat(4048), args_str: 'a'.repeat(49) }, 'invalid_args'],
    ['price under 0.001', { image: 'x', price: 0.0009 }, 'invalid_price'],
    ['price over 128', { image: 'x', price: 128.5 }, 'invalid_price'],
    ['an unknown runtype', { image: 'x', runtype: 'ssh_telnet' }, 'invalid_args'],
    ['args with ssh', { image: 'x', runtype: 'args ssh' }, 'invalid_args'],
    ['target_state paused', { image: 'x', target_state: 'paused' }, 'invalid_args'],
    ['an unknown template', { template_hash_id: 'f'.repeat(32) }, 'invalid_args'],
  ];

  test.each(refused)('%s is a 400 with the offer id, and creates nothing', async (_what, body, error) => {
    const offerId = freshOffer().id;
    const before = sim.history().length;
    const r = await create(body, offerId);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ success: false, error, msg: expect.any(String), ask_id: offerId });
    expect(sim.history()).toHaveLength(before);
  });

  const accepted: Array<[string, Record<string, unknown>]> = [
    ['image of 1024', { image: 'i'.repeat(1024) }],
    ['label of 256', { image: 'x', label: 'l'.repeat(256) }],
    ['env values of 256, 32768 in all', { image: 'x', env: env(126, 256) }],
    ['disk of 8 GB', { image: 'x', disk: 8 }],
    ['onstart of 4048', { image: 'x', onstart: 'o'.repeat(4048) }],
    ['args and onstart of 4096', { image: 'x', onstart: 'o'.repeat(4000), args: ['a'.repeat(96)] }],
    ['runtypes the CLI sends', { image: 'x', runtype: 'jupyter_direc ssh_direc ssh_proxy' }],
    [
      'the CLI body with its nulls',
      {
        client_id: 'me',
        image: 'x',
        env: {},
        price: null,
        disk: 10,
        label: null,
        extra: null,
        onstart: null,
        image_login: null,
        python_utf8: false,
        lang_utf8: false,
        use_jupyter_lab: false,
        jupyter_dir: null,
        force: false,
        cancel_unavail: false,
        template_hash_id: null,
        user: null,
        runtype: 'ssh_direc ssh_proxy',
      },
    ],
  ];

  test.each(accepted)('%s is accepted', async (_what, body) => {
    const r = await create(body);
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ success: true, new_contract: expect.any(Number) });
  });

  test('env in the documented Docker-flag form becomes extra_env pairs', async () => {
    const r = await create({ image: 'x', env: '-e TZ=UTC -e "NAME=a b" -p 8080:8080' });
    const inst = (await call(sim, 'GET', `/api/v0/instances/${r.body.new_contract}/`)).body.instances;
    expect(inst.extra_env).toEqual([
      ['TZ', 'UTC'],
      ['NAME', 'a b'],
      ['-p 8080:8080', '1'],
    ]);
  });

  test('a VM needs an SSH key on the account first', async () => {
    const r = await create({ image: 'x', vm: true });
    expect(r.body).toMatchObject({ success: false, error: 'no_ssh_key_for_vm' });
  });
});

describe('offer faults and cancel_unavail', () => {
  test('not_your_own answers the documented 403 about the offer', async () => {
    const offer = freshOffer();
    sim.setOfferFault(offer.id, 'not_your_own');
    const r = await create({ image: 'x' }, offer.id);
    expect(r.status).toBe(403);
    expect(r.body).toEqual({
      success: false,
      error: 'invalid_args',
      msg: `error 403/3586: Offer ${offer.id} is not your own. Hosts can only rent their own machines.`,
      ask_id: offer.id,
    });
    expect((await call(sim, 'PUT', `/_sim/offers/${offer.id}/fault`, { fault: null }, null)).status).toBe(200);
    expect((await create({ image: 'x' }, offer.id)).status).toBe(200);
    expect((await call(sim, 'PUT', `/_sim/offers/${offer.id}/fault`, { fault: 'nope' }, null)).status).toBe(400);
  });

  test('an offer that cannot start now: 410 when cancel_unavail is true (the on-demand default), else created stopped', async () => {
    const offers = [freshOffer(), freshOffer(), freshOffer(), freshOffer()];
    for (const o of offers) expect((await call(sim, 'PUT', `/_sim/offers/${o.id}/fault`, { fault: 'unavailable' }, null)).status).toBe(200);
    const gone = await create({ image: 'x' }, offers[0]!.id);
    expect(gone.status).toBe(410);
    expect(gone.body).toMatchObject({ success: false, error: 'no_such_ask', ask_id: offers[0]!.id });
    expect((await create({ image: 'x', cancel_unavail: true }, offers[1]!.id)).status).toBe(410);

    const kept = await create({ image: 'x', cancel_unavail: false }, offers[2]!.id);
    expect(kept.status).toBe(200);
    const inst = (await call(sim, 'GET', `/api/v0/instances/${kept.body.new_contract}/`)).body.instances;
    expect(inst).toMatchObject({
      actual_status: 'stopped',
      intended_status: 'stopped',
      status_msg: expect.stringContaining('not available'),
    });
    // Interruptible: cancel_unavail defaults to false.
    const bid = await create({ image: 'x', price: offers[3]!.min_bid }, offers[3]!.id);
    expect(bid.status).toBe(200);
    expect((await call(sim, 'GET', `/api/v0/instances/${bid.body.new_contract}/`)).body.instances.actual_status).toBe('stopped');
  });

  test('target_state stopped creates a stopped instance', async () => {
    const r = await create({ image: 'x', target_state: 'stopped' });
    expect((await call(sim, 'GET', `/api/v0/instances/${r.body.new_contract}/`)).body.instances).toMatchObject({
      actual_status: 'stopped',
      intended_status: 'stopped',
    });
  });

  test('a template gives the image, env and onstart; the request wins on conflicts', async () => {
    const t = (
      await call(sim, 'POST', '/api/v0/template/', {
        name: 't',
        image: 'vastai/base',
        tag: '1.0',
        env: '-e A=tpl -e B=tpl',
        onstart: 'echo tpl',
      })
    ).body.template;
    const r = await create({ template_hash_id: t.hash_id, env: { B: 'req' } });
    expect(r.status, r.text).toBe(200);
    const inst = (await call(sim, 'GET', `/api/v0/instances/${r.body.new_contract}/`)).body.instances;
    expect(inst).toMatchObject({
      image_uuid: 'vastai/base:1.0',
      onstart: 'echo tpl',
      template_hash_id: t.hash_id,
      extra_env: [
        ['A', 'tpl'],
        ['B', 'req'],
      ],
    });
  });
});

describe('price', () => {
  test("the instance's dph_total is the offer's dph_total for allocated_storage = disk, and the ledger bills it", async () => {
    let now = 1_000_000;
    const own = await startTestSim({
      seed: 11,
      timeScale: 1,
      now: () => now,
      config: { lifecycle: { provision_s: 0, boot_s: { min: 0, max: 0 } } },
    });
    try {
      const o = own.offers().find((x) => x.verified)!;
      const [offer] = (await call(own, 'POST', '/api/v0/bundles/', { id: { eq: o.id }, allocated_storage: 40 })).body.offers;
      const id = (await call(own, 'PUT', `/api/v0/asks/${o.id}/`, { image: 'x', disk: 40 })).body.new_contract;
      const inst = (await call(own, 'GET', `/api/v0/instances/${id}/`)).body.instances;
      expect(inst.actual_status).toBe('running');
      expect(inst.dph_total).toBeCloseTo(offer.dph_total, 12);
      expect(inst.dph_base).toBe(o.dph_base);
      now += 2 * 3600_000;
      expect(own.ledger().instances[0]!.total_usd).toBeCloseTo(2 * offer.dph_total, 9);
    } finally {
      await own.close();
    }
  });
});
