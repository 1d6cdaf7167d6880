// A strict reader of the Prometheus text exposition format (version 0.0.4), for tests of /metrics:
// every line must be a HELP or TYPE comment or a sample of the grammar, every sample must belong to
// a family declared by TYPE (with the suffixes its type allows), or it throws naming the line.
const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*';
// Prometheus reads values with Go's ParseFloat: NaN and Inf in any case (prom-client writes "Nan").
const VALUE =
  '(?:[+-]?(?:\\d+\\.?\\d*(?:[eE][+-]?\\d+)?|\\.\\d+(?:[eE][+-]?\\d+)?)|[Nn][Aa][Nn]|[+-]?[Ii][Nn][Ff](?:[Ii][Nn][Ii][Tt][Yy])?)';
const SAMPLE = new RegExp(
  `^(${NAME})(?:\\{((?:${LABEL}="(?:[^"\\\\\\n]|\\\\[\\\\"n])*")(?:,${LABEL}="(?:[^"\\\\\\n]|\\\\[\\\\"n])*")*,?)?\\})? (${VALUE})(?: -?\\d+)?$`,
);
const HELP = new RegExp(`^# HELP (${NAME}) (.*)$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const SUFFIXES: Record<string, string[]> = {
  counter: [''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  type: string;
  help: string;
  samples: Sample[];
}

function parseLabels(text: string | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  if (!text) return labels;
  for (const m of text.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
    labels[m[1]!] = m[2]!.replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
  }
  return labels;
}

export function parsePrometheus(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (const [i, line] of lines.entries()) {
    const where = `line ${i + 1}: ${JSON.stringify(line.slice(0, 120))}`;
    if (line === '') continue;
    const help = HELP.exec(line);
    if (help) {
      const f = families.get(help[1]!) ?? { type: 'untyped', help: '', samples: [] };
      f.help = help[2]!;
      families.set(help[1]!, f);
      continue;
    }
    const type = TYPE.exec(line);
    if (type) {
      const f = families.get(type[1]!) ?? { type: 'untyped', help: '', samples: [] };
      if (f.samples.length > 0) throw new Error(`TYPE after samples, ${where}`);
      f.type = type[2]!;
      families.set(type[1]!, f);
      continue;
    }
    if (line.startsWith('#')) continue;
    const s = SAMPLE.exec(line);
    if (!s) throw new Error(`not a Prometheus sample, ${where}`);
    const name = s[1]!;
    const family = [...families.entries()].find(([fname, f]) => SUFFIXES[f.type]!.some((suf) => name === fname + suf));
    if (!family) throw new Error(`a sample of no declared family, ${where}`);
    const raw = s[3]!.toLowerCase();
    const value = raw === 'nan' ? Number.NaN : raw.includes('inf') ? (raw.startsWith('-') ? -Infinity : Infinity) : Number(raw);
    family[1].samples.push({ name, labels: parseLabels(s[2]), value });
  }
  return families;
}

/** The value of one sample (labels matched exactly on the ones given); undefined when absent. */
export function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const f of families.values()) {
    const s = f.samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
    if (s) return s.value;
  }
  return undefined;
}
