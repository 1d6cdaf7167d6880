// What a run's logs keep out (issue #41 item 2): its `secrets`, env values under secret names, and
// the keys; env values otherwise are configuration and shown as written, and no piece of a secret
// blots out an ordinary word of the output. Runs stored before `secrets` keep every env value out.
import { describe, expect, it } from 'vitest';
import { LogSecrets } from '../../../../src/daemon/task-end/log-secrets.js';
import { silentLogger } from '../../../../src/logger.js';
import { planRun, storedSpecText, type RunPlan } from '../../../../src/job-spec/run-plan.js';
import { parseJobSpec } from '../../../../src/job-spec/validate.js';
import { loadConfig } from '../../../../src/config/load.js';

const API_KEY = 'a'.repeat(8) + 'api-key-value-0123456789';
const runs = loadConfig({}, { BERTH_API_KEY: 'k' }).config.runs;

function plan(fields: Record<string, unknown>): RunPlan {
  return planRun(parseJobSpec({ name: 'job', image: 'ubuntu:22.04', max_price_per_hour: 1, ...fields }), runs);
}

/** The scrubber of attempt 1 of run r1, whose plan is driven here, or (`stored`) only stored. */
function scrubberOf(spec: Pick<RunPlan, 'env' | 'secrets'> | undefined, stored?: string) {
  const secrets = new LogSecrets({
    log: silentLogger(),
    apiKey: API_KEY,
    keys: { put: () => undefined, get: () => undefined },
    specs: { get: () => spec },
    runs: { get: () => (stored === undefined ? undefined : { spec_json: stored }) },
  });
  return secrets.scrubberFor('r1', 1, 100);
}

describe('the log scrubber of a run', () => {
  it('shows an env value that is a common word as written, and the words around it', () => {
    const s = scrubberOf(plan({ env: { MODEL: 'weights', GREETING: 'hello' } }));
    expect(s.scrub('loaded weights\nhello from the task')).toBe('loaded weights\nhello from the task');
  });

  it('keeps a secrets value out wherever it is, whole or cut at a line edge, and blots no ordinary word', () => {
    const s = scrubberOf(plan({ secrets: { HF_TOKEN: 'hf_correcthorsebatterystaple' } }));
    expect(s.scrub('token is hf_correcthorsebatterystaple, loaded')).toBe('token is [redacted], loaded');
    expect(s.scrub('HF_CORRECTHORSEBATTERYSTAPLE')).toBe('[redacted]');
    // A tail that starts in the middle of the printed value, and a line cut short.
    expect(s.scrub('batterystaple\nnext line\nprinted hf_correcthorse')).toBe('[redacted]\nnext line\nprinted [redacted]');
    // Words that are pieces of the secret, in ordinary text.
    expect(s.scrub('the battery of horse tests passed')).toBe('the battery of horse tests passed');
  });

  it('treats an env variable whose name says it is a secret as one', () => {
    const s = scrubberOf(plan({ env: { WANDB_API_KEY: 'wandb-0123456789abcdef', DB_password: 'pa55word!x', MODEL: 'llama' } }));
    expect(s.scrub('key wandb-0123456789abcdef pw pa55word!x model llama')).toBe('key [redacted] pw [redacted] model llama');
  });

  it('a run stored before secrets existed keeps every env value out of its logs', () => {
    const old = JSON.parse(storedSpecText(plan({}))) as Record<string, unknown>;
    const stored = JSON.stringify({ ...old, env: { MODEL: 'weights-v2' }, berth_spec_version: 2 });
    expect(scrubberOf(undefined, stored).scrub('loaded weights-v2')).toBe('loaded [redacted]');
  });
});
