// The problems the job spec module reports for a spec the test expects to be refused.
import { expect } from 'vitest';
import { SpecError, type SpecIssue } from '../../src/errors.js';
import { parseJobSpec, parseJobSpecText } from '../../src/job-spec/validate.js';

function refused(parse: () => unknown, what: string): SpecIssue[] {
  try {
    parse();
  } catch (err) {
    expect(err).toBeInstanceOf(SpecError);
    return (err as SpecError).issues;
  }
  throw new Error(`expected the spec to be rejected: ${what}`);
}

/** The issues parseJobSpec reports for `input` (fails the test when it does not throw). */
export const issuesOf = (input: unknown): SpecIssue[] => refused(() => parseJobSpec(input), JSON.stringify(input));

/** The same for JSON text (text, so that a `__proto__` key stays an own key). */
export const issuesOfText = (text: string): SpecIssue[] => refused(() => parseJobSpecText(text), text);
