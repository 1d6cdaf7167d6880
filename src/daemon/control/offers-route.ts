// POST /v1/offers (`berth offers FILE`): what a run of this spec would find now, before it is
// submitted. The spec is resolved with this daemon's defaults exactly as a submission is
// (../runs/submission.ts: parseJobSpec, checkJobSpecAgainstConfig, planRun), and each level of its
// relax ladder is searched with the run's own query (buildSearchQuery, nothing blocked) and checked
// with the run's own usableOffers, so the offers are listed in the order a run would take them:
// level 0's usable offers in the spec's order, then what each relax step adds, marked with its level.
//
// The searches are the daemon's: they go through its client and so its rate limiter, shared with
// the runs (search is 10 per minute per identity: the x-rate-limit of search_offers.yaml in
// vast-ai/docs). Each level is one search; at most MAX_LEVELS are made per request and the levels
// past them are listed as not searched, so one `berth offers` never takes more than that from the runs.
import { BerthError, SpecError } from '../../errors.js';
import type { Config } from '../../config/schema.js';
import type { Offer, SearchQuery } from '../../client/types.js';
import { overCap } from '../../money-rules.js';
import { planRun } from '../../job-spec/run-plan.js';
import { billedPriceFor, buildSearchQuery, describeRelaxStep, relaxStepCount, usableOffers } from '../../job-spec/search-query.js';
import { checkJobSpecAgainstConfig, parseJobSpec } from '../../job-spec/validate.js';
import { jobSpecSchema } from '../../job-spec/schema.js';
import { OffersReportSchema, type OffersReport } from '../../wire/control-api.js';
import { HttpProblem, type ControlRoute } from './route-types.js';
import { readJsonSpec } from './submit-route.js';
import { isJsonContent } from '../../http/body.js';

/** Searches one `berth offers` may make: level 0 and the first three relax steps (a third of a minute's searches). */
const MAX_LEVELS = 4;

/** The searches of one request may wait for the rate limiter; the CLI waits 30 s for any answer. */
const SEARCH_TIMEOUT_MS = 28_000;

export interface OffersDeps {
  config: Pick<Config, 'runs' | 'polling'>;
  /** The daemon's search, through its rate limiter. */
  search(query: SearchQuery, signal: AbortSignal): Promise<Offer[]>;
}

const NOTHING_BLOCKED = { offerIds: [], machineIds: [] };

const text = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** The report of `POST /v1/offers` for the spec as sent (throws SpecError for an invalid one, as a submit does). */
async function previewOffers(specInput: unknown, deps: OffersDeps, signal: AbortSignal): Promise<OffersReport> {
  const parsed = parseJobSpec(specInput);
  checkJobSpecAgainstConfig(parsed, deps.config);
  const spec = planRun(parsed, deps.config.runs);
  const levels: OffersReport['levels'] = [];
  const offers: OffersReport['offers'] = [];
  const seen = new Set<number>();
  const last = relaxStepCount(spec);
  for (let level = 0; level <= last; level++) {
    const step = level === 0 ? null : describeRelaxStep(spec.relax[level - 1]!);
    if (level >= MAX_LEVELS) {
      levels.push({ level, step, searched: false, returned: 0, over_cap: 0, added: 0 });
      continue;
    }
    const returned = await deps.search(buildSearchQuery(spec, level, NOTHING_BLOCKED), signal);
    const overCapCount = returned.filter((o) => {
      const billed = billedPriceFor(o, spec);
      return billed === null || overCap(billed, spec.max_price_per_hour);
    }).length;
    const added = usableOffers(returned, spec, NOTHING_BLOCKED).filter((o) => !seen.has(o.id));
    for (const o of added) {
      seen.add(o.id);
      offers.push({
        level,
        id: o.id,
        machine_id: o.machine_id,
        gpu_name: o.gpu_name,
        num_gpus: o.num_gpus,
        gpu_ram: o.gpu_ram,
        billed_usd_per_hour: billedPriceFor(o, spec)!,
        dph_total: o.dph_total,
        reliability: num(o['reliability']) ?? num(o['reliability2']),
        geolocation: text(o['geolocation']),
      });
    }
    levels.push({ level, step, searched: true, returned: returned.length, over_cap: overCapCount, added: added.length });
  }
  const unsearched = levels.filter((l) => !l.searched).length;
  const note =
    unsearched === 0
      ? null
      : `levels ${MAX_LEVELS} to ${last} were not searched: one request searches at most ${MAX_LEVELS} levels (the service allows 10 searches a minute, shared with the runs)`;
  return { max_price_per_hour: spec.max_price_per_hour, disk_gb: spec.disk_gb, search_type: spec.search.type, levels, note, offers };
}

export function offersRoute(deps: OffersDeps | undefined): ControlRoute {
  return {
    method: 'POST',
    path: '/v1/offers',
    doc: {
      summary: `What a run of this job spec would find now: each relax level searched (at most ${MAX_LEVELS}, each one search through the daemon's rate limiter), the usable offers in the order the run would take them, with their billed $/h`,
      body: jobSpecSchema,
      responses: {
        200: { description: 'the offers and, per level, how many were returned and dropped above the cap', schema: OffersReportSchema },
      },
      errors: [404, 413, 415, 502],
    },
    handle: async ({ req }) => {
      if (!deps) throw new HttpProblem(404, 'not_found', 'This daemon searches no offers.');
      if (!isJsonContent(req))
        throw new HttpProblem(
          415,
          'unsupported_media_type',
          'POST /v1/offers takes a JSON job spec with "Content-Type: application/json".',
        );
      const body = await readJsonSpec(req);
      try {
        return { status: 200, body: await previewOffers(body, deps, AbortSignal.timeout(SEARCH_TIMEOUT_MS)) };
      } catch (err) {
        if (err instanceof BerthError && !(err instanceof SpecError))
          throw new HttpProblem(502, 'service_error', `The marketplace's search failed: ${err.message}`);
        throw err;
      }
    },
  };
}
