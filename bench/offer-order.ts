// The offers the daemon will try for a job spec, in its order (one per machine): the benchmark and
// the screenshots fault the first ones in the simulator so that a run fails over.
import { request } from 'undici';
import type { Offer } from '../src/client/types.js';
import { loadConfig } from '../src/config/load.js';
import { buildSearchQuery, usableOffers } from '../src/job-spec/search-query.js';
import { parseJobSpec } from '../src/job-spec/validate.js';
import { planRun } from '../src/job-spec/run-plan.js';
import type { RunningSimulator } from '../src/sim/index.js';

export async function tryOrder(sim: RunningSimulator, spec: Record<string, unknown>): Promise<Offer[]> {
  const resolved = planRun(parseJobSpec(spec), loadConfig({}, {}).config.runs);
  const res = await request(`${sim.url}/api/v0/bundles/`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sim.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(buildSearchQuery(resolved, 0, { offerIds: [], machineIds: [] })),
  });
  const { offers } = (await res.body.json()) as { offers: Offer[] };
  const machines = new Set<number>();
  return usableOffers(offers, resolved, { offerIds: [], machineIds: [] }).filter(
    (o) => !machines.has(o.machine_id) && machines.add(o.machine_id),
  );
}
