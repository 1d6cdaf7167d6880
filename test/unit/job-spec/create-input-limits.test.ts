// A spec the service would refuse on every create (create_instance.yaml x-input-validation) is
// refused at validation, with the JSON path named and no value of an env variable in the message.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { issuesOf } from '../../helpers/spec-issues.js';
import { attemptLabel } from '../../../src/daemon/instances/labels.js';
import { CREATE_INPUT_LIMITS, envTotalSize, sizeOf } from '../../../src/job-spec/create-input-limits.js';
import { encodeOnstart, ONSTART_MAX_CHARS } from '../../../src/job-spec/onstart.js';
import { parseJobSpec } from '../../../src/job-spec/validate.js';

const minimal = { name: 'job', image: 'ubuntu:22.04', max_price_per_hour: 0.5 };

describe('create input limits', () => {
  it('disk_gb below 8 GB', () => {
    expect(issuesOf({ ...minimal, disk_gb: 7.5 })).toEqual([{ path: '$.disk_gb', message: expect.stringMatching(/at least 8 GB/) }]);
    expect(parseJobSpec({ ...minimal, disk_gb: 8 }).disk_gb).toBe(8);
  });

  it('an env value over 256 characters, naming the variable but never showing the value', () => {
    const secret = 's'.repeat(250) + 'SECRET';
    const issues = issuesOf({ ...minimal, env: { OK: 'x'.repeat(256), HF_TOKEN: `${secret}!` } });
    expect(issues).toEqual([{ path: '$.env.HF_TOKEN', message: expect.stringMatching(/257 characters.*at most 256/) }]);
    expect(JSON.stringify(issues)).not.toContain('SECRET');
  });

  it('an env over 32768 characters in all, counted as the Docker flags', () => {
    const env = Object.fromEntries(Array.from({ length: 130 }, (_, i) => [`V${i}`, 'x'.repeat(250)]));
    expect(envTotalSize(env)).toBeGreaterThan(CREATE_INPUT_LIMITS.envTotalMaxChars);
    expect(issuesOf({ ...minimal, env })).toEqual([{ path: '$.env', message: expect.stringMatching(/at most 32768/) }]);
    const fits = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`V${i}`, 'x'.repeat(250)]));
    expect(parseJobSpec({ ...minimal, env: fits }).env).toEqual(fits);
  });

  it('an image over 1024 characters', () => {
    expect(issuesOf({ ...minimal, image: `r/${'a'.repeat(1023)}` })).toEqual([{ path: '$.image', message: expect.stringMatching(/1024/) }]);
    expect(parseJobSpec({ ...minimal, image: `r/${'a'.repeat(1022)}` }).image).toHaveLength(1024);
  });

  it('a bid outside 0.001-128 $/h', () => {
    const bid = (bid_price: number) => ({ ...minimal, max_price_per_hour: 500, search: { type: 'bid' }, bid_price });
    expect(issuesOf(bid(0.0005))).toEqual([{ path: '$.bid_price', message: expect.stringMatching(/at least 0.001/) }]);
    expect(issuesOf(bid(129))).toEqual([{ path: '$.bid_price', message: expect.stringMatching(/at most 128/) }]);
    expect(parseJobSpec(bid(128)).bid_price).toBe(128);
  });

  it('an onstart that even compressed exceeds 4048 characters (already refused)', () => {
    const random = randomBytes(6000).toString('base64');
    expect(issuesOf({ ...minimal, onstart: random }).map((i) => i.path)).toEqual(['$.onstart']);
  });

  it('args + args_str + onstart within 4096 together: berth sends only onstart, refused at submit past its limit', () => {
    expect(ONSTART_MAX_CHARS).toBeLessThanOrEqual(CREATE_INPUT_LIMITS.createTextTotalMaxChars);
    // The longest script that passes as it is goes as it is, under the sum's limit.
    const spec = parseJobSpec({ ...minimal, onstart: 'x'.repeat(ONSTART_MAX_CHARS) });
    expect(sizeOf(encodeOnstart(spec.onstart!))).toBeLessThanOrEqual(CREATE_INPUT_LIMITS.createTextTotalMaxChars);
    // An incompressible script past it is a spec error naming the field.
    const random = randomBytes(3100).toString('base64');
    expect(sizeOf(random)).toBeGreaterThan(CREATE_INPUT_LIMITS.createTextTotalMaxChars);
    expect(issuesOf({ ...minimal, onstart: random })).toEqual([{ path: '$.onstart', message: expect.stringMatching(/4048/) }]);
  });

  it('the label berth builds stays within 256 characters for any attempt number', () => {
    expect(attemptLabel('a1b2c3d4', 'abcdefghijkl', Number.MAX_SAFE_INTEGER).length).toBeLessThanOrEqual(CREATE_INPUT_LIMITS.labelMaxChars);
    expect(() => attemptLabel('x'.repeat(300), 'r', 1)).toThrow(RangeError);
  });
});
