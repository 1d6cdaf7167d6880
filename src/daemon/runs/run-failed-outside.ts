// A run that ends `failed` outside its machine: a bug stopped the machine, or this berth cannot read
// the snapshot an older one stored. Its state, the `run.failed` event of its log and that event's
// notification are written in one transaction, as any transition of a run is, so such a run is
// seen and told of like every other failed run. (The orphan sweep destroys whatever it held.)
import type { RunError } from '../../errors.js';
import type { Store } from '../../store/index.js';
import type { RunHooks } from './run-hooks.js';

export function failRunOutsideMachine(
  deps: { store: Store; hooks?: RunHooks | undefined },
  run: { id: string; name: string },
  error: RunError,
  at: number,
): void {
  const { store, hooks } = deps;
  store.transaction(() => {
    store.runs.setState(run.id, 'failed', error, at);
    const message = `run failed (${error.kind}): ${error.message}`;
    const id = store.events.append({ runId: run.id, at, type: 'run.failed', message, data: { error } });
    hooks?.noticed({ id: run.id, name: run.name, state: 'failed' }, 'run.failed', { id, message, data: { error } }, at);
  });
}
