// A live run this build of berth cannot drive: its stored spec is of a later version or refused by a
// parse stricter than the one that stored it (a default copied into it unparsed, a rule added
// since), or its machine snapshot is of a later version (a newer berth on the same store, or a
// downgrade). Failing such a run would destroy a running instance over a reading, not over anything
// the instance did; so it is never failed, taken or driven here. It is kept as it is (its instance,
// owned by a live run, is left alone by the orphan sweep) and said: in the run's events, the
// daemon's log and the run's view (`berth status`, with the version a daemon needs to drive it).
// A daemon that can read it drives it; or the user cancels it, and it ends `cancelled` (the orphan
// sweep destroys its instance). A snapshot older than this build migrates is another matter: that
// run fails `upgrade` (./run-placement.ts).
import { readStoredPlan, StoredSpecError } from '../../job-spec/run-plan.js';
import type { RunRow } from '../../store/index.js';
import { RUN_MACHINE_VERSION } from '../../../machines/run-machine.js';

/** Why this build cannot drive a stored run, and what could. */
export interface Unreadable {
  /** What cannot be read (never a value of the spec). */
  reason: string;
  /** The stored spec's version, when a later berth stored it: a daemon that reads it can drive the run. */
  specVersion: number | null;
  /** The machine snapshot's version, when a later berth saved it. */
  machineVersion: number | null;
}

type StoredRun = Pick<RunRow, 'spec_json' | 'snapshot_json' | 'machine_version'>;

/** The version of the run's machine snapshot when a later berth saved it, else null. */
export function newerSnapshot(row: Pick<RunRow, 'snapshot_json' | 'machine_version'>): number | null {
  const v = row.machine_version;
  return row.snapshot_json !== null && v !== null && v > RUN_MACHINE_VERSION ? v : null;
}

/** Why this build cannot drive the stored run, or undefined when it can. */
export function unreadableRun(row: StoredRun): Unreadable | undefined {
  return unreadableWith(row, specErrorOf(row.spec_json));
}

/**
 * What a run's view reads: the same answer, with the reading of each run's spec kept (a spec never
 * changes once stored, and one parse takes about half a millisecond: a list of a thousand live runs
 * is read once, not on every refresh). At most READINGS_MAX are kept; past that they start over.
 */
export function unreadableForView(row: StoredRun & Pick<RunRow, 'id'>): Unreadable | undefined {
  let reading = readings.get(row.id);
  if (reading?.specJson !== row.spec_json) {
    if (readings.size >= READINGS_MAX) readings.clear();
    reading = { specJson: row.spec_json, error: specErrorOf(row.spec_json) };
    readings.set(row.id, reading);
  }
  return unreadableWith(row, reading.error);
}

/**
 * A run this build has just planned and stored: its spec is the text of a plan this build made, and
 * this daemon drives the run from that plan; so its reading is kept as readable without the parse,
 * which took 4-5% of the daemon's time under `npm run bench -- --only names` (#50: the answer to
 * POST /v1/runs is the run's view). A daemon started later reads the spec anew, as any other.
 */
export function readableAsPlanned(row: Pick<RunRow, 'id' | 'spec_json'>): void {
  if (readings.size >= READINGS_MAX) readings.clear();
  readings.set(row.id, { specJson: row.spec_json, error: undefined });
}

const READINGS_MAX = 10_000;
const readings = new Map<string, { specJson: string; error: StoredSpecError | undefined }>();

function specErrorOf(specJson: string): StoredSpecError | undefined {
  try {
    readStoredPlan(specJson);
    return undefined;
  } catch (err) {
    if (!(err instanceof StoredSpecError)) throw err;
    return err;
  }
}

/** The same, from a read of its spec already made (`specError`: how it failed, if it did). */
export function unreadableWith(row: StoredRun, specError: StoredSpecError | undefined): Unreadable | undefined {
  const machineVersion = newerSnapshot(row);
  if (!specError && machineVersion === null) return undefined;
  const reasons = [
    ...(specError ? [specError.message] : []),
    ...(machineVersion !== null
      ? [`its state was saved by run machine version ${machineVersion}; this build of berth runs version ${RUN_MACHINE_VERSION}`]
      : []),
  ];
  return { reason: reasons.join('; '), specVersion: specError?.newerVersion ?? null, machineVersion };
}

/** What a daemon needs to drive the run, as the log, the events and the CLI say it. */
export function neededText(why: Pick<Unreadable, 'specVersion' | 'machineVersion'>): string {
  const versions = [
    ...(why.specVersion !== null ? [`stored spec version ${why.specVersion}`] : []),
    ...(why.machineVersion !== null ? [`run machine version ${why.machineVersion}`] : []),
  ];
  return versions.length > 0
    ? `a berth that reads ${versions.join(' and ')} (the one that stored it, or later)`
    : 'a berth whose job spec rules accept it (the one that stored it)';
}
