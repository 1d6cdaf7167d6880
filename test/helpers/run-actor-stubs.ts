// The run actors' production dependencies, as explicit stand-ins for unit tests that do not test
// them: every check passes, nothing is read or scrubbed. Production wires the real ones
// (src/daemon/daemon.ts composeRuns); the types make forgetting one a compile error there.
import type { RunActorDeps } from '../../src/daemon/runs/run-actor-deps.js';
import type { RunSpecs } from '../../src/job-spec/run-specs.js';

type Stubbed = Pick<
  RunActorDeps,
  'money' | 'failureLogs' | 'taskLogs' | 'logSecrets' | 'ownership' | 'serviceUrl' | 'uploadTimeoutS' | 'searchShareMs' | 'offersPerSearch'
>;

/** Money checks that let everything through; what is left of a run's limits is its whole spec's. */
export function passThroughActorDeps(specs: RunSpecs, clock: { now(): number }): Stubbed {
  return {
    money: {
      guard: {
        affordable: (_runId, candidates) => ({ candidates }),
        bidRefusal: () => null,
        left: (runId) => ({ runtimeS: specs.get(runId)?.max_runtime_s ?? null, usd: specs.get(runId)?.budget_usd ?? null }),
      },
      gate: { admit: async (_input, _signal, start) => start(), bidHold: () => null },
    },
    failureLogs: { beforeDestroy: async () => undefined },
    taskLogs: { readEnd: async () => ({ exitCode: null, at: clock.now() }) },
    logSecrets: { noteInstanceKey: () => undefined, forget: () => undefined },
    ownership: { check: () => undefined },
    serviceUrl: 'https://console.vast.ai',
    uploadTimeoutS: 600,
    // The configuration's defaults (runs.search_share_s, runs.gone_offers_per_search).
    searchShareMs: 30_000,
    offersPerSearch: 3,
  };
}
