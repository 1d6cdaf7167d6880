// The job spec's check of search filters against the service's documented search fields (issue
// #30): the table is exactly the search_offers OpenAPI schema's filter keys united with the
// official CLI's `offers_fields`; a misspelt field or a wrong operand type is refused with its path
// and the nearest known name, in the daemon's parser and in the dashboard's JSON Schema alike.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { SpecError, type SpecIssue } from '../../../src/errors.js';
import { nearestSearchField, SEARCH_FIELDS } from '../../../src/job-spec/search-fields.js';
import { checkConfigRelax, jobSpecJsonSchema, parseJobSpec } from '../../../src/job-spec/validate.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '../../fixtures');
const minimal = { name: 'x', image: 'pytorch/pytorch', max_price_per_hour: 1 };

function issuesOf(spec: unknown): SpecIssue[] {
  try {
    parseJobSpec(spec);
    return [];
  } catch (err) {
    if (err instanceof SpecError) return err.issues;
    throw err;
  }
}

/** search_offers.yaml's request body keys that are filters (not limit/type/order/allocated_storage). */
function documentedFilterKeys(): string[] {
  const doc = JSON.parse(readFileSync(join(FIXTURES, 'service/openapi/search_offers.json'), 'utf8')) as {
    paths: Record<string, { post: { requestBody: { content: Record<string, { schema: { properties: Record<string, unknown> } }> } } }>;
  };
  const props = doc.paths['/api/v0/bundles/']!.post.requestBody.content['application/json']!.schema.properties;
  return Object.keys(props).filter((k) => !['limit', 'type', 'order', 'allocated_storage'].includes(k));
}

/** The CLI's `offers_fields = {...}` (vast-cli vastai/api/query.py), commented-out entries left out. */
function cliOfferFields(): string[] {
  const text = readFileSync(join(FIXTURES, 'vast-cli/query.py'), 'utf8');
  const body = /\noffers_fields = \{([\s\S]*?)\n\}/.exec(text)![1]!;
  return body
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('"'))
    .map((l) => /^"([^"]+)"/.exec(l)![1]!);
}

describe('the search field table', () => {
  it('is the OpenAPI schema’s filter keys united with the CLI’s field table, nothing more', () => {
    const expected = [...new Set([...documentedFilterKeys(), ...cliOfferFields()])].sort();
    expect(Object.keys(SEARCH_FIELDS).sort()).toEqual(expected);
  });

  it('suggests the nearest name for a typo and the long name for a CLI alias, nothing for a stranger', () => {
    expect(nearestSearchField('gpu_nmae')).toBe('gpu_name');
    expect(nearestSearchField('numgpus')).toBe('num_gpus');
    expect(nearestSearchField('geolocaton')).toBe('geolocation');
    expect(nearestSearchField('cuda_vers')).toBe('cuda_max_good');
    expect(nearestSearchField('favourite_colour')).toBeUndefined();
  });
});

describe('job spec filters against the table', () => {
  it('refuses an unknown search field with its path and the nearest known name', () => {
    expect(issuesOf({ ...minimal, search: { filters: { gpu_nmae: { eq: 'RTX 4090' } } } })).toEqual([
      { path: '$.search.filters.gpu_nmae', message: 'unknown search field; did you mean gpu_name?' },
    ]);
  });

  it('refuses a string where the service compares a number, and other wrong operand types', () => {
    expect(
      issuesOf({
        ...minimal,
        search: {
          filters: {
            num_gpus: { eq: '1' },
            gpu_ram: { in: [24000, '48000'] },
            gpu_name: { eq: 4090 },
            verified: { eq: 'true' },
            rentable: { gte: 1 },
            geolocation: { lt: 3 },
          },
        },
      }),
    ).toEqual([
      { path: '$.search.filters.num_gpus.eq', message: 'expected a number, got string' },
      { path: '$.search.filters.gpu_ram.in[1]', message: 'expected a number, got string' },
      { path: '$.search.filters.gpu_name.eq', message: 'expected a string, got number' },
      { path: '$.search.filters.verified.eq', message: 'expected true or false, got string' },
      { path: '$.search.filters.rentable.gte', message: expect.stringMatching(/^gte does not apply to a true\/false field/) },
      { path: '$.search.filters.geolocation.lt', message: expect.stringMatching(/^lt does not apply to a text field/) },
    ]);
  });

  it('checks relax steps too: dropped and set fields, and the operands they set', () => {
    expect(
      issuesOf({ ...minimal, relax: [{ drop: ['verifed'] }, { set: { gpu_nmae: { in: ['A100'] }, num_gpus: { in: ['2'] } } }] }),
    ).toEqual([
      { path: '$.relax[0].drop[0]', message: 'unknown search field; did you mean verified?' },
      { path: '$.relax[1].set.gpu_nmae', message: 'unknown search field; did you mean gpu_name?' },
      { path: '$.relax[1].set.num_gpus.in[0]', message: 'expected a number, got string' },
    ]);
  });

  it('accepts the shipped examples and every kind of field with its own operands', () => {
    for (const file of ['job.json', 'demo-job.json', 'task.json', 'demo-task.json', 'impossible-job.json']) {
      const spec = JSON.parse(readFileSync(join(FIXTURES, '../../examples', file), 'utf8')) as unknown;
      expect(issuesOf(spec), file).toEqual([]);
    }
    expect(
      issuesOf({
        ...minimal,
        search: {
          filters: {
            num_gpus: { gte: 1, in: [1, 2] },
            verified: { in: [true, false] },
            has_avx: { eq: 1 },
            gpu_name: { notin: ['Tesla T4'] },
            driver_version: { gte: 535086005, neq: '535.86.05' },
            geolocation: { in: ['US', 'CA'] },
          },
        },
      }),
    ).toEqual([]);
  });
});

describe('the JSON Schema the dashboard checks with', () => {
  const validate = new Ajv2020({ allErrors: true, strict: false }).compile(jobSpecJsonSchema());
  const errorsOf = (spec: unknown) => (validate(spec) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.keyword}`));

  it('refuses an unknown search field and a wrong operand type as they are typed', () => {
    expect(errorsOf({ ...minimal, search: { filters: { gpu_nmae: { eq: 'RTX 4090' } } } })).toContain(
      '/search/filters additionalProperties',
    );
    expect(errorsOf({ ...minimal, search: { filters: { num_gpus: { eq: '1' } } } })).toContain('/search/filters/num_gpus/eq type');
    expect(errorsOf({ ...minimal, relax: [{ set: { gpu_nmae: { eq: 'x' } } }] })).toContain('/relax/0/set additionalProperties');
  });

  it('accepts what the parser accepts', () => {
    expect(
      errorsOf({ ...minimal, search: { filters: { num_gpus: { eq: 1 }, gpu_name: { in: ['RTX 4090'] }, verified: { eq: true } } } }),
    ).toEqual([]);
  });
});

describe("the config's default relax ladder (runs.relax)", () => {
  it('is checked against the documented search fields as a job spec is, naming the path and the nearest name', () => {
    expect(() => checkConfigRelax([{ drop: ['verifed'] }])).toThrow(
      /runs\.relax\.0\.drop\.0: unknown search field; did you mean verified\?/,
    );
    expect(() => checkConfigRelax([{ drop: ['verified'] }, { set: { gpu_nmae: { eq: 'RTX 4090' } } }])).toThrow(
      /runs\.relax\.1\.set\.gpu_nmae: unknown search field; did you mean gpu_name\?/,
    );
    expect(() => checkConfigRelax([{ drop: ['geolocation'] }, { set: { num_gpus: { gte: 1 } } }])).not.toThrow();
  });

  // Issue #38 item 1: the start check looked at field names only, the ladder went into every run's
  // stored spec, and the stricter parse of that spec on read-back refused it after a restart.
  it.each([
    ['a string number', [{ set: { reliability: { gte: '0.9' } } }], /runs\.relax\.0\.set\.reliability\.gte: expected a number, got string/],
    ['an empty drop', [{ drop: ['verified'] }, { drop: [] }], /runs\.relax\.1\.drop: must name at least one filter/],
    ['a dropped port filter', [{ drop: ['direct_port_count'] }], /runs\.relax\.0\.drop\.0: "direct_port_count" is never relaxed/],
    [
      'a port filter set below 1',
      [{ set: { direct_port_count: { gte: 0 } } }],
      /runs\.relax\.0\.set\.direct_port_count: must keep direct_port_count at 1 or more/,
    ],
    ['an unknown operator', [{ set: { gpu_ram: { like: 16 } } }], /runs\.relax\.0\.set\.gpu_ram\.like: unknown operator "like"/],
  ])("is parsed by the job spec's own relax schema: %s stops the daemon with the path of the problem", (_, ladder, message) => {
    expect(() => checkConfigRelax(ladder)).toThrow(message);
    // The same ladder in a spec is what a stored spec's read-back refuses.
    expect(() => parseJobSpec({ ...minimal, relax: ladder })).toThrow(SpecError);
  });
});
