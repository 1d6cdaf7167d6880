// Turns zod's issues into SpecIssues a person can act on: a JSON path (`$.search.filters.gpu_ram.gte`)
// and a short message ("expected a number, got string"). Messages specific to one field are
// written next to it in ./schema.ts; this module words the generic ones.
import type { z } from 'zod';
import { isNonFiniteNumber, NOT_FINITE_MESSAGE, type SpecIssue } from '../errors.js';
import { KEY_PLACEHOLDER, jsonType } from './schema.js';

type RawIssue = z.core.$ZodRawIssue;
type Issue = z.core.$ZodIssue;

const article = (noun: string) => (/^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`);

/** Names zod uses for expected types, as a user reads them. */
const TYPE_NAMES: Record<string, string> = { int: 'integer', record: 'object', tuple: 'array' };

/** The per-parse error map: messages for issues whose schema did not word its own. */
export function describeIssue(iss: RawIssue): string {
  switch (iss.code) {
    case 'invalid_type': {
      if (isNonFiniteNumber(iss.input)) return NOT_FINITE_MESSAGE;
      const expected = article(TYPE_NAMES[iss.expected] ?? iss.expected);
      return iss.input === undefined ? `missing (expected ${expected})` : `expected ${expected}, got ${jsonType(iss.input)}`;
    }
    case 'too_small':
      return bound(iss.origin, iss.inclusive ? 'at least' : 'greater than', iss.minimum);
    case 'too_big':
      return bound(iss.origin, iss.inclusive ? 'at most' : 'less than', iss.maximum);
    case 'invalid_value':
      return `expected one of ${iss.values.map((v) => JSON.stringify(v)).join(', ')}, got ${JSON.stringify(iss.input)}`;
    case 'unrecognized_keys':
      return `unknown field "${KEY_PLACEHOLDER}"`;
    case 'invalid_key':
      return iss.issues.map((i) => i.message).join('; ');
    default:
      return 'invalid value';
  }
}

function bound(origin: string, relation: string, limit: number | bigint): string {
  if (origin === 'string') return `must be ${relation} ${limit} characters long`;
  if (origin === 'array') return `must have ${relation} ${limit} items`;
  return `must be ${relation} ${limit}`;
}

/** One SpecIssue per problem; an issue naming several unknown keys becomes one issue per key. */
export function toSpecIssues(issues: readonly Issue[]): SpecIssue[] {
  return issues.flatMap((iss) =>
    iss.code === 'unrecognized_keys'
      ? iss.keys.map((key) => ({ path: jsonPath([...iss.path, key]), message: iss.message.replace(KEY_PLACEHOLDER, key) }))
      : [{ path: jsonPath(iss.path), message: iss.message }],
  );
}

/** `$`, then `.name` for identifier keys, `[n]` for indexes and `["key"]` for any other key. */
export function jsonPath(path: readonly PropertyKey[]): string {
  return (
    '$' +
    path
      .map((key) => {
        if (typeof key === 'number') return `[${key}]`;
        const name = String(key);
        return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? `.${name}` : `[${JSON.stringify(name)}]`;
      })
      .join('')
  );
}
