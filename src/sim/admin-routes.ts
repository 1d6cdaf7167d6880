// Test-only endpoints under /_sim/. They exist only when the config sets `admin: true` (404
// otherwise), need no key, skip injected faults and rate limits, and are meant for loopback use.
import { z } from 'zod';
import { faultProfileSchema, faultConfigSchema, limitSchema, logsConfigSchema, offerFaultSchema, type RateGroup } from './config.js';
import { instanceRecord } from './instance-record.js';
import type { Route } from './route.js';
import { invalidArgs } from './sim-error.js';
import { bodyObject, idParam, num } from './validate.js';
import type { SimWorld } from './world.js';

export interface SimControl {
  setTimeScale(scale: number): void;
  reset(): Promise<void>;
}

function profileOf(body: unknown) {
  const parsed = faultProfileSchema.safeParse(bodyObject(body).profile);
  if (!parsed.success) throw invalidArgs(`profile must be one of ${faultProfileSchema.options.join(', ')}.`);
  return parsed.data;
}

const admin = (method: Route['method'], path: string, handler: Route['handler']): Route => ({
  method,
  path: `/_sim${path}`,
  auth: 'none',
  handler,
});

export function adminRoutes(control: SimControl): Route[] {
  const setFaults: Route['handler'] = ({ world, body }) => {
    const parsed = faultConfigSchema.partial().safeParse(bodyObject(body));
    if (!parsed.success) throw invalidArgs(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    return { body: { success: true, faults: world.setFaults(parsed.data) } };
  };
  const setLogs: Route['handler'] = ({ world, body }) => {
    const parsed = logsConfigSchema.partial().strict().safeParse(bodyObject(body));
    if (!parsed.success) throw invalidArgs(issuesText(parsed.error));
    return { body: { success: true, logs: world.logUploads.update(parsed.data) } };
  };
  const setRateLimits: Route['handler'] = ({ world, body }) => {
    const groups = Object.keys(world.limiter.current().groups) as [RateGroup, ...RateGroup[]];
    const schema = z
      .object({
        enabled: z.boolean().optional(),
        count_refused: z.boolean().optional(),
        groups: z.partialRecord(z.enum(groups), limitSchema.nullable()).optional(),
      })
      .strict();
    const parsed = schema.safeParse(bodyObject(body));
    if (!parsed.success) throw invalidArgs(issuesText(parsed.error));
    return { body: { success: true, rate_limits: world.limiter.update(parsed.data) } };
  };
  return [
    admin('GET', '/instances', ({ world }) => ({ body: { instances: liveView(world) } })),
    admin('GET', '/history', ({ world }) => ({ body: { history: world.instances.history() } })),
    admin('GET', '/ledger', ({ world }) => ({ body: world.ledger() })),
    admin('GET', '/stats', ({ world }) => ({ body: world.stats })),
    admin('GET', '/faults', ({ world }) => ({ body: world.faults.current() })),
    admin('PUT', '/faults', setFaults),
    admin('POST', '/faults', setFaults),
    admin('GET', '/logs', ({ world }) => ({ body: world.logUploads.current() })),
    admin('PUT', '/logs', setLogs),
    admin('GET', '/rate-limits', ({ world }) => ({ body: world.limiter.current() })),
    admin('PUT', '/rate-limits', setRateLimits),
    admin('POST', '/instances/{id}/service-stop', ({ world, params, body }) => {
      const after = num(bodyObject(body, true), 'after_s', { min: 0 }) ?? 0;
      const inst = world.serviceStop(idParam(params, 'id'), after);
      if (!inst) throw invalidArgs(`no live instance ${params['id']}.`);
      return { body: { success: true, stop_at_sim_s: Math.round((world.clock.simS() + after) * 1000) / 1000 } };
    }),
    // SSH faults on one instance (ssh-server.ts): its open sessions cut now; a new host key (its
    // sshd restarts with it now if it runs, else at its next start); every key refused, or not.
    admin('POST', '/instances/{id}/ssh/drop', ({ world, params }) => {
      const inst = liveInstance(world, params);
      return { body: { success: true, listening: world.sshListeners.dropSessions(inst.hist.id) } };
    }),
    admin('POST', '/instances/{id}/ssh/host-key', ({ world, params }) => {
      world.sshListeners.changeHostKey(liveInstance(world, params));
      return { body: { success: true } };
    }),
    admin('PUT', '/instances/{id}/ssh/refuse-keys', ({ world, params, body }) => {
      const refuse = bodyObject(body).refuse;
      if (typeof refuse !== 'boolean') throw invalidArgs('refuse must be true or false.');
      world.instanceSshKeys.refuseAll(liveInstance(world, params).hist.id, refuse);
      return { body: { success: true, refuse } };
    }),
    admin('PUT', '/machines/{id}/profile', ({ world, params, body }) => {
      world.profiles.setMachine(idParam(params, 'id'), profileOf(body));
      return { body: { success: true } };
    }),
    admin('PUT', '/offers/{id}/profile', ({ world, params, body }) => {
      world.profiles.setOffer(idParam(params, 'id'), profileOf(body));
      return { body: { success: true } };
    }),
    admin('PUT', '/offers/{id}/fault', ({ world, params, body }) => {
      const parsed = offerFaultSchema.nullable().safeParse(bodyObject(body).fault);
      if (!parsed.success) throw invalidArgs(`fault must be one of ${offerFaultSchema.options.join(', ')}, or null.`);
      world.profiles.setOfferFault(idParam(params, 'id'), parsed.data);
      return { body: { success: true } };
    }),
    admin('POST', '/machines/{id}/min-bid', ({ world, params, body }) => {
      const pct = num(bodyObject(body), 'raise_pct');
      if (pct === undefined || pct <= -100) throw invalidArgs('raise_pct must be a number of percent above -100.');
      return { body: { success: true, ...world.raiseMinBid(idParam(params, 'id'), pct) } };
    }),
    admin('POST', '/instances/{id}/price-increase', ({ world, params, body }) => {
      const o = bodyObject(body);
      const pct = num(o, 'raise_pct');
      if (pct === undefined || pct <= 0) throw invalidArgs('raise_pct must be a number of percent above 0.');
      const cutover = num(o, 'cutover_s');
      if (cutover !== undefined && cutover < 0) throw invalidArgs('cutover_s must be a number of sim seconds, 0 or more.');
      const row = world.raisePrice(idParam(params, 'id'), pct, cutover ?? null);
      if (!row) throw invalidArgs(`no live instance ${params['id']}.`);
      return { body: { success: true, pending_price_increase: row } };
    }),
    admin('POST', '/machines/{id}/offline', ({ world, params }) => {
      const hit = world.instances.machineOffline(idParam(params, 'id'));
      return { body: { success: true, instance_ids: hit.map((i) => i.hist.id) } };
    }),
    admin('POST', '/account/credit', ({ world, body }) => {
      const usd = num(bodyObject(body), 'add_usd');
      if (usd === undefined) throw invalidArgs('add_usd must be a number of dollars.');
      return { body: { success: true, credit: world.addCredit(usd) } };
    }),
    admin('GET', '/webhook-deliveries', ({ world }) => ({ body: { deliveries: world.webhooks.deliveries() } })),
    admin('PUT', '/time-scale', ({ body }) => {
      const scale = num(bodyObject(body), 'time_scale');
      if (scale === undefined || scale <= 0) throw invalidArgs('time_scale must be a positive number.');
      control.setTimeScale(scale);
      return { body: { success: true, time_scale: scale } };
    }),
    admin('POST', '/reset', async () => {
      await control.reset();
      return { body: { success: true } };
    }),
  ];
}

function liveInstance(world: SimWorld, params: Record<string, string>) {
  const inst = world.instances.get(idParam(params, 'id'));
  if (!inst) throw invalidArgs(`no live instance ${params['id']}.`);
  return inst;
}

function issuesText(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ');
}

/** Live instances as clients see them, plus what only the simulator knows. */
function liveView(world: SimWorld) {
  return world.instances.list().map((i) => ({ ...instanceRecord(i), offer_id: i.offer.id, profile: i.hist.profile }));
}
