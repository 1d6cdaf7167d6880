// The corpus of real samples (test/fixtures/service/<endpoint>/*.json, sources in each file and in
// its README): every documented example of the endpoints berth calls, and bodies recorded from the
// real service in public material, replayed through the client against a real HTTP server. Each
// sample says what berth must read of it (`expect`): price with disk, status, SSH host and port,
// label, gpu_util, next_token, the error kind.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { creditOf } from '../../../src/account/credit.js';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import type { Instance } from '../../../src/client/types.js';
import { BerthError, ServiceHttpError } from '../../../src/errors.js';
import { billedPricePerHour } from '../../../src/job-spec/search-query.js';
import { json, startFakeServer, testConfig, type FakeServer } from './fake-server.js';

interface Sample {
  source: string;
  call: string;
  status: number;
  /** `text/plain` for a body the service sends as text (the default is JSON). */
  content_type?: string;
  body: unknown;
  expect: Record<string, unknown>;
}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../fixtures/service');
const samples: Array<[string, Sample]> = readdirSync(ROOT)
  .filter((d) => d !== 'openapi' && statSync(join(ROOT, d)).isDirectory())
  .flatMap((d) =>
    readdirSync(join(ROOT, d))
      .filter((f) => f.endsWith('.json'))
      .map((f): [string, Sample] => [`${d}/${f}`, JSON.parse(readFileSync(join(ROOT, d, f), 'utf8')) as Sample]),
  );

/** What berth reads of an instance record. */
function instanceReading(inst: Instance, extra: Record<string, unknown> | undefined) {
  return {
    instance: {
      id: inst.id,
      label: inst.label,
      actual_status: inst.actual_status,
      ssh_host: inst.ssh_host ?? null,
      ssh_port: inst.ssh_port ?? null,
      public_ipaddr: inst.public_ipaddr ?? null,
      direct_ssh_port: inst.ports?.['22/tcp']?.[0]?.HostPort ?? null,
      gpu_util: inst.gpu_util ?? null,
      dph_total: inst.dph_total ?? null,
    },
    ...(extra ? { extra: Object.fromEntries(Object.keys(extra).map((k) => [k, inst[k] ?? null])) } : {}),
  };
}

const calls: Record<string, (c: MarketplaceClient, s: Sample) => Promise<Record<string, unknown>>> = {
  search: async (c) => ({
    offers: (await c.searchOffers({ limit: 5 })).map((o) => ({
      id: o.id,
      machine_id: o.machine_id,
      gpu_name: o.gpu_name,
      num_gpus: o.num_gpus,
      dph_total: o.dph_total,
      billed_20gb: billedPricePerHour(o, 20),
    })),
  }),
  create: async (c) => ({
    instance_id: (await c.createInstance(1234567, { image: 'pytorch/pytorch', disk: 20, label: 'berth:s:r:1', price: 0.2 })).instanceId,
  }),
  list: async (c) => {
    const page = await c.listInstancePage({});
    return { instances: page.instances.map((i) => instanceReading(i, undefined).instance), next_token: page.nextToken };
  },
  show: async (c, s) => {
    const inst = await c.showInstance(883);
    return inst === null ? { instance: null } : instanceReading(inst, s.expect['extra'] as Record<string, unknown> | undefined);
  },
  destroy: async (c) => ({ result: await c.destroyInstance(883) }),
  label: async (c) => (await c.setInstanceLabel(883, 'berth:s:r:1'), { result: 'ok' }),
  stop: async (c) => (await c.setInstanceState(883, 'stopped'), { result: 'ok' }),
  change_bid: async (c) => (await c.changeBid(883, 0.3), { result: 'ok' }),
  logs: async (c) => ({ result_url: (await c.requestLogs(883, { tail: 100 })).resultUrl }),
  current_user: async (c) => ({ credit: creditOf(await c.currentUser()) }),
  secrets: async (c) => ({ names: Object.keys(await c.listSecrets()) }),
  template_delete: async (c) => ({ result: await c.deleteTemplate(5) }),
  webhook_rotate: async (c) => ({ webhook_id: (await c.rotateWebhookSecret(42)).id }),
  api_key_create: async (c) => ({ id: (await c.createApiKey({ name: 'k', permissions: { api: {} } })).id }),
  api_key_delete: async (c) => ({ result: await c.deleteApiKey(9) }),
  ssh_keys: async (c) => ({ count: await c.countSshKeys() }),
  charges: async (c) => ({
    charges: (await c.charges({ fromS: 1730419200, toS: 1730678400 })).map((ch) => ({ source: ch.source, amount: ch.amount })),
  }),
  price_increases: async (c) => {
    const got = await c.pendingPriceIncreases();
    return {
      rows: got.rows.map((r) => ({ pending_price_increase_id: r.pending_price_increase_id, contract_id: r.contract_id })),
      truncated: got.truncated,
    };
  },
};

let server: FakeServer;
let client: MarketplaceClient;
let current: Sample | undefined;
beforeAll(async () => {
  server = await startFakeServer((_q, res) => {
    const s = current!;
    if (s.content_type !== 'text/plain') return json(res, s.status, s.body);
    res.writeHead(s.status, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(String(s.body));
  });
  // A 429 sample is answered to every retry: the time budget ends the call.
  client = createMarketClient({
    baseUrl: server.url,
    apiKey: 'sk-corpus-0123456789',
    config: testConfig({ retry: { max_retry_time_s: 0.3 } }),
  });
});
afterAll(async () => {
  await client.close();
  await server.close();
});

describe('the corpus of real samples, replayed through the client', () => {
  it('covers every endpoint berth calls, each sample naming its source', () => {
    expect(new Set(samples.map(([, s]) => s.call))).toEqual(new Set(Object.keys(calls)));
    for (const [name, s] of samples) expect(s.source.length, name).toBeGreaterThan(20);
  });

  it.each(samples)('%s', async (_name, sample) => {
    current = sample;
    let reading: Record<string, unknown>;
    try {
      reading = await calls[sample.call]!(client, sample);
    } catch (err) {
      if (!(err instanceof BerthError)) throw err;
      reading = { error: err.code, ...(err instanceof ServiceHttpError && err.code !== 'rate_limited' ? { status: err.status } : {}) };
    }
    expect(reading).toEqual(sample.expect);
  });
});
