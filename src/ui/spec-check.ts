// Checks a job spec as it is typed, against the JSON Schema `berth schema` prints (compiled at
// build time): every issue with its JSON path, as the daemon names them ($.search.filters...). The
// daemon checks again on submit, with rules a JSON Schema cannot say; its issues are shown the same way.
import validate from 'virtual:job-spec-validator';
import type { SpecIssue } from '../errors.js';
import { unknownSearchFieldMessage } from '../job-spec/search-fields.js';

/** `/search/filters/0` → `$.search.filters[0]`. */
function jsonPath(pointer: string): string {
  if (pointer === '') return '$';
  return (
    '$' +
    pointer
      .slice(1)
      .split('/')
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .map((p) => (/^\d+$/.test(p) ? `[${p}]` : /^[A-Za-z_$][\w$]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`))
      .join('')
  );
}

export function checkSpecText(text: string): { spec?: unknown; issues: SpecIssue[] } {
  if (text.trim() === '') return { issues: [{ path: '$', message: 'empty: paste or upload a job spec (JSON)' }] };
  let spec: unknown;
  try {
    spec = JSON.parse(text);
  } catch (err) {
    return { issues: [{ path: '$', message: `not valid JSON: ${(err as Error).message}` }] };
  }
  if (validate(spec)) return { spec, issues: [] };
  const seen = new Set<string>();
  const issues: SpecIssue[] = [];
  for (const e of validate.errors ?? []) {
    // An anyOf/oneOf repeats its branches' errors; the branch errors say more than the summary.
    if (e.keyword === 'anyOf' || e.keyword === 'oneOf' || e.keyword === 'if') continue;
    const extra = e.params['additionalProperty'];
    const path = jsonPath(e.instancePath) + (typeof extra === 'string' ? `.${extra}` : '');
    // A search field the service does not know gets the daemon's own words, with the nearest name.
    const searchFields = /^\/search\/filters$|^\/relax\/\d+\/set$/.test(e.instancePath);
    const message =
      typeof extra === 'string' ? (searchFields ? unknownSearchFieldMessage(extra) : 'unknown field') : (e.message ?? e.keyword);
    const key = `${path} ${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push({ path, message });
  }
  return { spec, issues };
}
