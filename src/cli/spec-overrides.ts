// Spec overrides on the command line (`berth submit job.yaml --set max_price_per_hour=0.5`), as
// SkyPilot's `--env`/`--gpus` or Helm's `--set`: `PATH=VALUE`, PATH a dot-separated field path
// (`search.filters.gpu_name.eq`), VALUE read as YAML (`0.5` a number, `true` a boolean,
// `[US, CA]` a list, anything else a string; quote it to keep `"0.5"` a string). Applied to the
// file's value before validation, so an override is checked exactly as if it were in the file.
import { parse } from 'yaml';
import { SpecError } from '../errors.js';

interface SpecOverride {
  path: string[];
  value: unknown;
  /** As typed, for messages. */
  text: string;
}

const RESERVED = new Set(['__proto__', 'constructor', 'prototype']);

/** One `--set` argument; a SpecError at `--set` when it is not `PATH=VALUE`. */
export function parseOverride(text: string): SpecOverride {
  const eq = text.indexOf('=');
  const path = eq > 0 ? text.slice(0, eq).split('.') : [];
  const bad = (why: string) => new SpecError([{ path: `--set ${text}`, message: why }]);
  if (eq <= 0) throw bad('expected PATH=VALUE, e.g. --set max_price_per_hour=0.5');
  if (path.some((k) => k === '' || RESERVED.has(k))) throw bad(`"${text.slice(0, eq)}" is not a field path (names joined by dots)`);
  let value: unknown;
  try {
    value = parse(text.slice(eq + 1)) as unknown;
  } catch (err) {
    throw bad(`the value is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  return { path, value: value === null && text.slice(eq + 1).trim() === '' ? '' : value, text };
}

/** The spec with every override applied in order (a copy; objects on the way are made as needed). */
export function applyOverrides(spec: unknown, overrides: readonly SpecOverride[]): unknown {
  if (overrides.length === 0) return spec;
  const root: unknown = structuredClone(spec);
  if (!isObject(root)) throw new SpecError([{ path: '$', message: 'a job spec is an object; --set cannot apply to anything else' }]);
  for (const { path, value, text } of overrides) {
    let at: Record<string, unknown> = root;
    for (const key of path.slice(0, -1)) {
      const next = at[key];
      if (next === undefined) at = at[key] = {};
      else if (isObject(next)) at = next;
      else throw new SpecError([{ path: `--set ${text}`, message: `"${key}" is not an object in the spec, so it has no fields to set` }]);
    }
    at[path[path.length - 1]!] = value;
  }
  return root;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
