// Every secret a container's log may show, known whatever path found the instance: the API key,
// the run's secrets (its `secrets` values and env values under secret names, ../../job-spec/spec-secrets.ts;
// other env values are configuration, shown as written), the attempt's readiness token, and the instance's own key
// (CONTAINER_API_KEY). That key comes only in the create's answer (the lists do not show it), so it
// is kept in memory and in the store (instance_keys), where a restarted daemon finds it; a key berth
// never saw (an instance adopted by its label after a lost create answer) is sought by its shape.
// Failure logs and task logs (`berth logs`) scrub through this one place.
import { scrubKeyShapes, SecretScrubber } from '../../client/scrub.js';
import { toRunError } from '../../errors.js';
import { readStoredPlan, type RunPlan } from '../../job-spec/run-plan.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import type { Logger } from '../../logger.js';
import { secretValues } from '../../job-spec/spec-secrets.js';

export interface LogSecretsDeps {
  log: Logger;
  /** The marketplace API key: scrubbed from every log text (a script may print it). */
  apiKey: string;
  /**
   * Where the instance keys are kept across restarts (the store's instance_keys table): a create's
   * key is written there, and read back for an instance this process did not create.
   */
  keys: { put(instanceId: number, key: string): void; get(instanceId: number): string | undefined };
  /** The specs of the runs driven here: their secrets are scrubbed too. */
  specs: RunSpecs<Pick<RunPlan, 'env' | 'secrets'>>;
  /**
   * The stored runs (their resolved spec as JSON): the secrets of a run this daemon does not drive
   * (another daemon on a shared store does, or it ended) are read from there. Without it such a
   * run's log showed its secrets in clear through any daemon but the driving one (required for
   * that reason: a wiring that forgot it compiled before).
   */
  runs: { get(runId: string): { spec_json: string } | undefined };
  /** The attempt's readiness callback token, when callbacks are on. */
  tokenFor?(runId: string, n: number): string;
}

export interface Scrubber {
  scrub(text: string): string;
}

export class LogSecrets {
  /** Per-instance keys (CONTAINER_API_KEY) seen at create in this process. */
  private readonly instanceKeys = new Map<number, string>();

  constructor(private readonly deps: LogSecretsDeps) {}

  /** The create answered with the instance's own key: its log must not show it either. */
  noteInstanceKey(instanceId: number, key: string | undefined): void {
    if (!key) return;
    this.instanceKeys.set(instanceId, key);
    try {
      this.deps.keys.put(instanceId, key);
    } catch (err) {
      // A store that refuses writes: this process still knows the key; a restart would fall back
      // to scrubbing whatever looks like a key.
      this.deps.log.warn({ instanceId, err: toRunError(err) }, `the key of instance ${instanceId} could not be stored`);
    }
  }

  /** The instance is being destroyed: this process lets go of its key (the store keeps it until the destroy is confirmed). */
  forget(instanceId: number): void {
    this.instanceKeys.delete(instanceId);
  }

  /** What scrubs attempt n's log on `instanceId`: taken while the run is live (its spec is needed). */
  scrubberFor(runId: string, n: number, instanceId: number): Scrubber {
    const spec = this.deps.specs.get(runId) ?? this.storedSpec(runId);
    const secrets = [this.deps.apiKey, ...secretValues(spec)];
    const token = this.deps.tokenFor?.(runId, n);
    if (token) secrets.push(token);
    const instanceKey = this.instanceKeys.get(instanceId) ?? this.storedKey(instanceId);
    if (instanceKey) secrets.push(instanceKey);
    // The task's own output: a piece of a secret is sought only where a line is cut (../../client/scrub.ts).
    const scrubber = new SecretScrubber(secrets, { pieces: 'at-line-edges' });
    return { scrub: (text) => scrubKeyShapes(scrubber.scrub(text), instanceKey === undefined) };
  }

  /**
   * The run's spec as stored; a store that cannot be read now, or a stored spec this build cannot
   * read, throws (no log unscrubbed).
   */
  private storedSpec(runId: string): Pick<RunPlan, 'env' | 'secrets'> {
    const row = this.deps.runs.get(runId);
    if (!row) return {};
    return readStoredPlan(row.spec_json);
  }

  private storedKey(instanceId: number): string | undefined {
    try {
      return this.deps.keys.get(instanceId);
    } catch {
      return undefined; // unreadable now: scrubbed by shape instead
    }
  }
}
