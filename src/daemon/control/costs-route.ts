// GET /v1/costs (`berth costs`): spend per run and instance since a day, beside the service's
// charges unless `service=false`. The report is made by ../money/costs.ts, handed in by daemon.ts;
// without it the route answers 404.
import type { Clock } from '../../clock.js';
import { CostsReportSchema, type CostsReport } from '../../wire/control-api.js';
import { parseSince } from '../money/costs.js';
import { HttpProblem, type ControlRoute } from './route-types.js';

export interface CostsRouteDeps {
  clock: Pick<Clock, 'now'>;
  costs?(sinceMs: number | undefined, service: boolean): Promise<CostsReport>;
}

export function costsRoute(deps: CostsRouteDeps): ControlRoute {
  return {
    method: 'GET',
    path: '/v1/costs',
    doc: {
      summary: "Spend per run and per instance (berth costs), beside the service's charges where the key may read billing",
      query: [
        {
          name: 'since',
          description: 'from 00:00 UTC of this day (YYYY-MM-DD, or an ISO time); default: every record kept',
          schema: { type: 'string' },
        },
        {
          name: 'service',
          description:
            "false: berth's own figures only, without reading the service's charges (the dashboard's refreshes: no call to the service); default true",
          schema: { type: 'string', enum: ['true', 'false'] },
        },
      ],
      responses: { 200: { description: 'the report', schema: CostsReportSchema } },
      errors: [400, 404],
    },
    handle: async ({ url }) => {
      if (!deps.costs) throw new HttpProblem(404, 'not_found', 'No route GET /v1/costs.');
      let since: number | undefined;
      try {
        since = parseSince(url.searchParams.get('since'), deps.clock.now());
      } catch (err) {
        throw new HttpProblem(400, 'bad_request', (err as Error).message);
      }
      const service = url.searchParams.get('service') ?? 'true';
      if (service !== 'true' && service !== 'false') throw new HttpProblem(400, 'bad_request', 'service must be true or false.');
      return { status: 200, body: await deps.costs(since, service === 'true') };
    },
  };
}
