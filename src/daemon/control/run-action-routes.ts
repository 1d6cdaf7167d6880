// The control API's routes that act on one run: cancel it, or let a run held after a restored
// backup go on. Each answers with the run as it stands; the run moves on in the supervisor.
import type { Clock } from '../../clock.js';
import type { Store } from '../../store/index.js';
import { RunSchema } from '../../wire/control-api.js';
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
        responses: { 202: { description: 'the run, as it stands', schema: RunSchema } },
        errors: [404, 503],
      },
      handle: (r) => {
        const { id } = runOf(store, r);
        supervisor.cancel(id);
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
