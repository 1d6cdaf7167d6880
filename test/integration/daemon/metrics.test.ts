// GET /metrics of a real daemon (in process) against the simulator: strict Prometheus text, the
// families the README lists with Prometheus' naming conventions, no per-run labels, and figures
// that move as a run goes from submitted to running to cancelled.
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Run } from '../../../src/wire/control-api.js';
import { parsePrometheus, sampleValue, type Family } from '../../helpers/prometheus.js';
import { jobSpec, startWorld, type World } from '../../helpers/world.js';

let world: World;
beforeAll(async () => {
  world = await startWorld();
  await world.daemon.ready;
});
afterAll(async () => {
  await world?.close();
});

async function scrape(): Promise<{ contentType: string; families: Map<string, Family> }> {
  const { status, contentType, text } = await new Promise<{ status: number; contentType: string; text: string }>((resolve, reject) => {
    // No token: /metrics is open like /healthz.
    const req = httpRequest(`${world.daemon.url}/metrics`, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          contentType: String(res.headers['content-type']),
          text: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
  expect(status).toBe(200);
  return { contentType, families: parsePrometheus(text) };
}

const EXPECTED: Record<string, string> = {
  berth_runs: 'gauge',
  berth_attempts_total: 'counter',
  berth_detection_seconds: 'histogram',
  berth_task_duration_seconds: 'histogram',
  berth_service_requests_total: 'counter',
  berth_service_request_duration_seconds: 'histogram',
  berth_service_rate_limited_total: 'counter',
  berth_service_pauses_total: 'counter',
  berth_service_paused_seconds_total: 'counter',
  berth_limiter_queue_depth: 'gauge',
  berth_limiter_paused: 'gauge',
  berth_list_sweep_duration_seconds: 'histogram',
  berth_list_sweep_pages: 'gauge',
  berth_live_instances: 'gauge',
  berth_live_instances_usd_per_hour: 'gauge',
  berth_spend_usd_total: 'counter',
  berth_notifications: 'gauge',
  berth_notification_posts_total: 'counter',
  // prom-client's default process metrics
  process_cpu_seconds_total: 'counter',
  process_resident_memory_bytes: 'gauge',
  nodejs_heap_size_used_bytes: 'gauge',
};

describe('GET /metrics', () => {
  it('is strict Prometheus text with every family the README lists, named by the conventions, without per-run labels', async () => {
    const { contentType, families } = await scrape();
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const [name, type] of Object.entries(EXPECTED)) expect({ name, type: families.get(name)?.type }).toEqual({ name, type });
    for (const [name, f] of families) {
      if (!name.startsWith('berth_')) continue;
      expect(f.help.length, `${name} has a HELP line`).toBeGreaterThan(10);
      // Counters end in _total; units are base units.
      if (f.type === 'counter') expect(name).toMatch(/_total$/);
      expect(name).not.toMatch(/_(ms|milliseconds|minutes|hours|kb|mb)(_|$)/);
      for (const s of f.samples)
        for (const label of Object.keys(s.labels)) expect(['state', 'outcome', 'group', 'status', 'result', 'via', 'le']).toContain(label);
    }
    // Every run state and delivery state is always there (0 until it is not).
    expect(
      families
        .get('berth_runs')!
        .samples.map((s) => s.labels.state)
        .sort(),
    ).toEqual(
      [
        'booting',
        'cancelled',
        'collecting',
        'creating',
        'destroying',
        'expired',
        'failed',
        'keeping',
        'queued',
        'rebidding',
        'running',
        'searching',
        'succeeded',
      ].sort(),
    );
    expect(
      families
        .get('berth_notifications')!
        .samples.map((s) => s.labels.state)
        .sort(),
    ).toEqual(['dead', 'delivered', 'pending']);
  });

  it('moves as a run is submitted, runs and is cancelled', async () => {
    const before = (await scrape()).families;
    expect(sampleValue(before, 'berth_runs', { state: 'running' })).toBe(0);
    expect(sampleValue(before, 'berth_live_instances')).toBe(0);
    const spendBefore = sampleValue(before, 'berth_spend_usd_total')!;

    const run = (await world.api<Run>('POST', '/v1/runs', jobSpec({ name: 'metrics' }))).body;
    await world.waitFor(run.id, (r) => r.state === 'running');
    const running = (await scrape()).families;
    expect(sampleValue(running, 'berth_runs', { state: 'running' })).toBe(1);
    expect(sampleValue(running, 'berth_live_instances')).toBe(1);
    const dph = (await world.api<Run>('GET', `/v1/runs/${run.id}`)).body.instance!.dph_total!;
    expect(sampleValue(running, 'berth_live_instances_usd_per_hour')).toBeCloseTo(dph, 6);
    expect(sampleValue(running, 'berth_service_requests_total', { group: 'search', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sampleValue(running, 'berth_service_requests_total', { group: 'create', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sampleValue(running, 'berth_service_requests_total', { group: 'list', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sampleValue(running, 'berth_detection_seconds_count', { via: 'ssh' })).toBe(1); // ready_when "ssh" is the default
    expect(sampleValue(running, 'berth_list_sweep_duration_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(sampleValue(running, 'berth_list_sweep_pages')).toBe(1);

    // Spend grows while the instance exists: billed $/h × time.
    await new Promise((r) => setTimeout(r, 300));
    const later = (await scrape()).families;
    expect(sampleValue(later, 'berth_spend_usd_total')!).toBeGreaterThan(spendBefore);

    await world.api('POST', `/v1/runs/${run.id}/cancel`);
    await world.waitFor(run.id, (r) => r.state === 'cancelled');
    const after = (await scrape()).families;
    expect(sampleValue(after, 'berth_runs', { state: 'running' })).toBe(0);
    expect(sampleValue(after, 'berth_runs', { state: 'cancelled' })).toBe(1);
    expect(sampleValue(after, 'berth_attempts_total', { outcome: 'cancelled' })).toBe(1);
    expect(sampleValue(after, 'berth_live_instances')).toBe(0);
    expect(sampleValue(after, 'berth_live_instances_usd_per_hour')).toBe(0);
    expect(sampleValue(after, 'berth_service_requests_total', { group: 'destroy', status: '200' })).toBeGreaterThanOrEqual(1);
    // A counter never goes down; once the instance is gone the spend stops growing.
    const spent = sampleValue(after, 'berth_spend_usd_total')!;
    expect(spent).toBeGreaterThanOrEqual(sampleValue(later, 'berth_spend_usd_total')!);
    await new Promise((r) => setTimeout(r, 100));
    expect(sampleValue((await scrape()).families, 'berth_spend_usd_total')).toBe(spent);
  });
});
