// The control API's routes that act on one run: cancel it, or let a run held after a restored
// backup go on. Each answers with the run as it stands; the run moves on in the supervisor.
import type { Clock } from '../../clock.js';
import type { Store } from '../../store/index.js';
import { BodyTooLargeError, hasBody, readBody } from '../../http/body.js';
import { CancelBodySchema, RunSchema, type CancelBody } from '../../wire/control-api.js';
import type { Supervisor } from '../runs/supervisor.js';
import { HttpProblem, runOf, type ControlRoute } from './route-types.js';
import { loadRunView } from './run-view.js';

export interface RunActionRoutesDeps {
  store: Store;
  /** The Supervisor, or on a shared store an object that acts for every daemon's runs. */
  supervisor: Pick<Supervisor, 'cancel' | 'resumeHeld'>;
  clock: Pick<Clock, 'now'>;
}

export function runActionRoutes(deps: RunActionRoutesDeps): ControlRoute[] {
  const { store, supervisor } = deps;
  return [
    {
      method: 'POST',
      path: '/v1/runs/{id}/cancel',
      doc: {
        summary: 'Stops a run and destroys every instance it holds',
        description:
          'A task with outputs is stopped and its outputs taken first (within files.outputs_timeout_s); `no_outputs: true`, or a second cancel, destroys at once.',
        body: CancelBodySchema,
        bodyOptional: true,
        responses: { 202: { description: 'the run, as it stands', schema: RunSchema } },
        errors: [400, 404, 413, 503],
      },
      handle: async (r) => {
        const { id } = runOf(store, r);
        const body = await cancelBody(r.req);
        supervisor.cancel(id, { noOutputs: body.no_outputs === true });
        return { status: 202, body: loadRunView(store, id, deps.clock.now()) };
      },
    },
    {
      method: 'POST',
      path: '/v1/runs/{id}/resume',
      doc: {
        summary: 'Lets a run held after a restored backup go on',
        responses: { 202: { description: 'the run, as it stands', schema: RunSchema } },
        errors: [404, 409, 503],
      },
      handle: (r) => {
        const row = runOf(store, r);
        if (row.held_at === null || row.ended_at !== null) {
          throw new HttpProblem(
            409,
            'not_held',
            `Run ${row.id} is not held: only runs held after a restored backup need \`berth resume\`.`,
          );
        }
        supervisor.resumeHeld(row.id);
        return { status: 202, body: loadRunView(store, row.id, deps.clock.now()) };
      },
    },
  ];
}

/** The cancel's body: none, or a small JSON object (CancelBodySchema). */
async function cancelBody(req: Parameters<ControlRoute['handle']>[0]['req']): Promise<CancelBody> {
  if (!hasBody(req)) return {};
  let text: string;
  try {
    text = await readBody(req, 4096);
  } catch (err) {
    if (err instanceof BodyTooLargeError) throw new HttpProblem(413, 'too_large', 'The cancel body is larger than 4 KiB.');
    throw err;
  }
  if (text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new HttpProblem(400, 'bad_request', 'The cancel body is not JSON: send none, or {"no_outputs": true}.');
  }
  const checked = CancelBodySchema.safeParse(parsed);
  if (!checked.success) throw new HttpProblem(400, 'bad_request', 'The cancel body takes one field, "no_outputs" (true or false).');
  return checked.data;
}
