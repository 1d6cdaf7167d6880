// Run only by test/e2e/suite-exit-code.test.ts, never by the suite itself (its name is not *.test.ts):
// one test that fails, so that the run's exit code can be checked.
import { expect, it } from 'vitest';

it('fails on purpose', () => {
  expect(1).toBe(2);
});
