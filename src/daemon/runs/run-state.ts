// The run's state as the store and the wire know it (wire/run-states.ts), read off a machine
// snapshot. The two lists are tied by the type checker: a state added to the machine but not to the
// wire (or the other way round) fails `npm run typecheck` here, instead of being joined by a cast.
import type { SnapshotFrom } from 'xstate';
import type { runMachine, RunMachineState } from '../../../machines/run-machine.js';
import type { RunState } from '../../wire/run-states.js';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const statesAgree: Same<RunMachineState, RunState> = true;
void statesAgree;

/** The run's state in a snapshot. A snapshot is never taken in the transient `settle`. */
export function runStateOf(snapshot: SnapshotFrom<typeof runMachine>): RunState {
  const v = snapshot.value;
  const top = typeof v === 'string' ? v : (Object.keys(v)[0] as keyof typeof v);
  if (top === 'settle') throw new Error('a run snapshot was taken in the transient state settle');
  return top satisfies RunMachineState;
}
