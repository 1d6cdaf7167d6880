// A submission: the job spec validated and planned once (src/job-spec/run-plan.ts), stored with its
// run id and the hash that tells a repeated submission (same Idempotency-Key, same spec: the same
// run) from a key reused for another spec (a conflict), then handed with its plan to the registry
// of live runs.
//
// The write goes through `commit`: in the daemon a group commit (../../store/group-commit.ts), so
// that the submissions that arrive together share one commit and its wait for the disk
// (synchronous=FULL). That wait was most of a submission's time: with 16 clients submitting, 39% of
// the daemon's CPU profile was the COMMIT of one transaction per submission (#50). Each submission
// still answers only once its own write has committed, its name claimed and its run inserted in a
// savepoint of its own, one after the other, so the names stay unique and a conflict or a failed
// write rolls back that submission alone.
import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config/schema.js';
import { BerthError, SpecError } from '../../errors.js';
import { planRun, storedSpecText, type RunPlan } from '../../job-spec/run-plan.js';
import type { JobSpec } from '../../job-spec/schema.js';
import { checkJobSpecAgainstConfig, parseJobSpec } from '../../job-spec/validate.js';
import type { Logger } from '../../logger.js';
import type { RunRow, Store } from '../../store/index.js';
import { readableAsPlanned } from './unreadable-runs.js';

/** The same Idempotency-Key sent with another spec: nothing is stored. */
export class IdempotencyConflictError extends BerthError {
  constructor(
    readonly key: string,
    readonly runId: string,
  ) {
    super(
      'control_rejected',
      `Idempotency-Key "${key}" already belongs to run ${runId}, which was submitted with a different job spec: resubmit that spec to get run ${runId}, or use a new key.`,
    );
  }
}

/** JSON with every object's keys sorted, so that one spec always hashes alike. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** sha256 of the spec as submitted, in canonical JSON: one spec always hashes alike. */
function specHash(parsed: unknown): string {
  return createHash('sha256').update(canonicalJson(parsed)).digest('hex');
}

function newRunId(): string {
  // 12 characters of base32: short enough for labels and typing, 60 bits of randomness.
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const bytes = randomBytes(12);
  let id = '';
  for (const b of bytes) id += alphabet[b & 31];
  return id;
}

/** The registry a submission hands its new run to (the supervisor). */
interface RunIntake {
  /** Throws daemon_stopping while the daemon shuts down: nothing new is stored then. */
  assertAccepting(): void;
  /** A run just stored, with the spec it was resolved to: started at once when the runs are resumed. */
  started(row: RunRow, plan: RunPlan): void;
}

export interface SubmissionsDeps {
  store: Store;
  clock: Pick<Clock, 'now'>;
  config: Config;
  log: Logger;
  intake: RunIntake;
  /**
   * Why berth cannot log in to its instances now (its SSH key unusable: the sentence with its fix),
   * or undefined when it can: a workdir goes up over that login, so a spec with one is refused
   * rather than rented for an upload that cannot happen. Asked at each such submit (a key fixed on
   * disk counts at once). Absent: no check (tests that upload nothing).
   */
  loginBlocked?(): string | undefined;
  /**
   * Runs a submission's write in a transaction and resolves once it has committed (rejects if it
   * threw or did not commit): the daemon's group commit. Absent: a transaction of its own, at once.
   */
  commit?(write: () => void): Promise<void>;
}

type Inserted = ReturnType<Store['runs']['insert']>;

/** `POST /v1/runs`: a job spec validated, resolved and stored with its `submitted` event, then handed to the registry. */
export class Submissions {
  constructor(private readonly deps: SubmissionsDeps) {}

  /**
   * Validates and stores a job spec; with an idempotency key already used, returns that run. A spec
   * refused throws before anything is queued; the answer comes once the run is committed.
   */
  async submit(specInput: unknown, idempotencyKey?: string): Promise<{ row: RunRow; created: boolean }> {
    const { store, config, intake } = this.deps;
    intake.assertAccepting();
    const parsed = parseJobSpec(specInput);
    checkJobSpecAgainstConfig(parsed, config);
    checkWorkdirStored(parsed, store);
    checkWorkdirCanGoUp(parsed, this.deps.loginBlocked);
    const plan = planRun(parsed, config.runs);
    const requestHash = specHash(parsed);
    const specJson = storedSpecText(plan);
    // When it was submitted, not when its group came to be written.
    const now = this.deps.clock.now();
    let result: Inserted | undefined;
    await this.commit(() => {
      // Asked again here: the daemon may have begun to stop while this write waited for its group.
      intake.assertAccepting();
      result = this.insertRun(plan, specJson, requestHash, idempotencyKey, now);
    });
    const inserted = result!;
    if (inserted.created) {
      readableAsPlanned(inserted.row);
      this.deps.log.info({ runId: inserted.row.id, name: plan.name }, 'run submitted');
      // The plan just made goes to the driver as it is: not read back from spec_json.
      intake.started(inserted.row, plan);
    }
    return { row: store.runs.get(inserted.row.id)!, created: inserted.created };
  }

  private commit(write: () => void): Promise<void> {
    if (this.deps.commit) return this.deps.commit(write);
    this.deps.store.transaction(write);
    return Promise.resolve();
  }

  /** The run inserted with its name and its `submitted` event; in the caller's transaction. */
  private insertRun(plan: RunPlan, specJson: string, requestHash: string, idempotencyKey: string | undefined, now: number): Inserted {
    const { store } = this.deps;
    // Names are unique among live runs, so that a run can be named by its name (`berth status
    // train`): a second live `train` becomes `train-2`, said in its first event. The stored spec
    // keeps the name as written.
    const name = store.runs.claimName(plan.name);
    const inserted = store.runs.insert({ id: newRunId(), name, specJson, createdAt: now, idempotencyKey, requestHash });
    if (!inserted.created && inserted.row.request_hash !== null && inserted.row.request_hash !== requestHash) {
      throw new IdempotencyConflictError(idempotencyKey!, inserted.row.id);
    }
    if (inserted.created) {
      store.events.append({
        runId: inserted.row.id,
        at: now,
        type: 'submitted',
        message:
          `submitted "${name}" (image ${plan.image}, max $${plan.max_price_per_hour}/h)` +
          (name === plan.name ? '' : `; named "${name}" because a live run is already named "${plan.name}"`),
      });
    }
    return inserted;
  }
}

/**
 * A workdir is a local directory: the daemon takes it only packed by `berth submit`, which puts the
 * archive first (POST /v1/blobs/{sha256}) and names it in workdir_sha256. Nothing is stored otherwise.
 */
function checkWorkdirStored(spec: JobSpec, store: Pick<Store, 'blobs'>): void {
  if (spec.workdir === undefined) return;
  if (spec.workdir_sha256 === undefined)
    throw new SpecError([
      { path: '$.workdir', message: 'is a local directory: submit this spec with `berth submit`, which packs and uploads it' },
    ]);
  if (store.blobs.size(spec.workdir_sha256) === null)
    throw new SpecError([
      {
        path: '$.workdir_sha256',
        message: 'names no workdir archive this store holds: `berth submit` uploads it first (POST /v1/blobs/{sha256})',
      },
    ]);
}

/** A workdir goes up over berth's SSH login: while its key cannot be used, nothing is rented for it. */
function checkWorkdirCanGoUp(spec: JobSpec, loginBlocked: SubmissionsDeps['loginBlocked']): void {
  if (spec.workdir === undefined) return;
  const why = loginBlocked?.();
  if (why === undefined) return;
  throw new SpecError([
    {
      path: '$.workdir',
      message: `cannot reach an instance now, so nothing was rented: berth puts it there over SSH, but ${lowerFirst(why).replace(/\.$/, '')}; then submit again (the daemon needs no restart)`,
    },
  ]);
}

const lowerFirst = (text: string) => text.charAt(0).toLowerCase() + text.slice(1);
