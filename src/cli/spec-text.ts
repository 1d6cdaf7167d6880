// A job spec file's text as a value, in the format its name says (`.yaml`/`.yml`: YAML, anything
// else: JSON), with the place of every problem: a syntax error at its line and column, and each
// schema problem at the line and column of the value its path names, so that a person finds it in
// the file they wrote. JSON values come from JSON.parse (exactly what the daemon would read); the
// positions of both formats come from the `yaml` package's document, JSON being a subset of YAML.
import { LineCounter, parseDocument, type Document } from 'yaml';
import { SpecError, type SpecIssue } from '../errors.js';

export type SpecFormat = 'json' | 'yaml';

export function specFormatOf(file: string): SpecFormat {
  return /\.ya?ml$/i.test(file) ? 'yaml' : 'json';
}

/** A parsed spec file: its value, and where in the text a JSON path's value stands. */
export interface SpecText {
  value: unknown;
  /** `line L, column C` of the value at `path` (zod's path), or null when the path is not in the text. */
  placeOf(path: readonly PropertyKey[]): string | null;
}

export function parseSpecText(text: string, format: SpecFormat): SpecText {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
  const value = format === 'json' ? parseJson(text) : yamlValue(doc, lines);
  return {
    value,
    placeOf(path) {
      const node = nodeAt(doc, path);
      if (!node?.range) return null;
      const { line, col } = lines.linePos(node.range[0]);
      return `line ${line}, column ${col}`;
    },
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const message = (err as Error).message;
    // V8 says where: "... in JSON at position 13"; a person counts lines and columns.
    const at = /at position (\d+)/.exec(message);
    const where = at ? ` at ${lineAndColumn(text, Number(at[1]))}` : '';
    throw new SpecError([{ path: '$', message: `not valid JSON${where}: ${message.replace(/ in JSON at position \d+.*$/, '')}` }]);
  }
}

function yamlValue(doc: Document, lines: LineCounter): unknown {
  if (doc.errors.length > 0) {
    throw new SpecError(
      doc.errors.map((e) => {
        const { line, col } = lines.linePos(e.pos[0]);
        return {
          path: '$',
          message: `not valid YAML at line ${line}, column ${col}: ${e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')}`,
        };
      }),
    );
  }
  // Plain JSON data: YAML's dates and other tags would not survive the trip to the daemon.
  return doc.toJS({ maxAliasCount: 100 }) as unknown;
}

function lineAndColumn(text: string, offset: number): string {
  const before = text.slice(0, offset).split('\n');
  return `line ${before.length}, column ${before[before.length - 1]!.length + 1}`;
}

function nodeAt(doc: Document, path: readonly PropertyKey[]): { range?: [number, number, number] | null } | null {
  // The deepest node the path reaches: a missing field's issue points at the object that lacks it.
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n) as unknown[], true) as { range?: [number, number, number] | null } | undefined;
    if (node && typeof node === 'object') return node;
  }
  return null;
}

/** The issues of a parse, each with the place of its value in the file where the text has it. */
export function placeIssues(issues: readonly SpecIssue[], text: SpecText): SpecIssue[] {
  return issues.map((issue) => {
    const path = pathOf(issue.path);
    const place = path && path.length > 0 ? text.placeOf(path) : null;
    return place ? { ...issue, message: `${issue.message} (${place})` } : issue;
  });
}

/** `$.a[0]["b c"]` (src/job-spec/issues.ts `jsonPath`) back to its keys; null when it is not one. */
function pathOf(jsonPath: string): PropertyKey[] | null {
  if (!jsonPath.startsWith('$')) return null;
  const keys: PropertyKey[] = [];
  const token = /\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/y;
  token.lastIndex = 1;
  while (token.lastIndex < jsonPath.length) {
    const m = token.exec(jsonPath);
    if (!m) return null;
    keys.push(m[1] ?? (m[2] !== undefined ? Number(m[2]) : (JSON.parse(m[3]!) as string)));
  }
  return keys;
}
