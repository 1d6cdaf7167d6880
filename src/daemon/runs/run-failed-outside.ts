// A run that ends outside its machine: `failed` when a bug stopped the machine, or this berth cannot
// read the snapshot an older one stored; `cancelled` when the user ends a run this berth keeps but
// cannot drive (./unreadable-runs.ts). Its state, the event of its log and that event's
// notification are written in one transaction, as any transition of a run is, so such a run is
// seen and told of like every other ended run. (The orphan sweep destroys whatever it held.)
import type { RunError } from '../../errors.js';
import type { Store } from '../../store/index.js';
import type { RunHooks } from './run-hooks.js';

type EndDeps = { store: Store; hooks?: RunHooks | undefined };

export function failRunOutsideMachine(deps: EndDeps, run: { id: string; name: string }, error: RunError, at: number): void {
  endRunOutsideMachine(deps, run, { state: 'failed', error, message: `run failed (${error.kind}): ${error.message}` }, at);
}

/** A kept run (one this build cannot drive) that the user cancelled: its instance is left to the orphan sweep. */
export function cancelRunOutsideMachine(deps: EndDeps, run: { id: string; name: string }, at: number): void {
  const message = 'run cancelled; this berth cannot drive it, so the orphan sweep destroys any instance it holds';
  endRunOutsideMachine(deps, run, { state: 'cancelled', error: null, message }, at);
}

function endRunOutsideMachine(
  deps: EndDeps,
  run: { id: string; name: string },
  end: { state: 'failed' | 'cancelled'; error: RunError | null; message: string },
  at: number,
): void {
  const { store, hooks } = deps;
  const type = end.state === 'failed' ? 'run.failed' : 'run.cancelled';
  const data = end.error ? { error: end.error } : null;
  store.transaction(() => {
    store.runs.setState(run.id, end.state, end.error, at);
    const id = store.events.append({ runId: run.id, at, type, message: end.message, ...(data ? { data } : {}) });
    hooks?.noticed({ id: run.id, name: run.name, state: end.state }, type, { id, message: end.message, data }, at);
  });
}
