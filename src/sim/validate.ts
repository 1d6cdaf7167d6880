// Small checks for request bodies and path parameters. Each failure is the service's 400
// `invalid_args` naming the field, never a crash on a surprising type.
import { invalidArgs, invalidRequest } from './sim-error.js';

export type Json = Record<string, unknown>;

/** The body as an object; an absent body is `{}` when `optional`. */
export function bodyObject(body: unknown, optional = false): Json {
  if (body === undefined && optional) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidRequest('Request body must be a JSON object.');
  }
  return body as Json;
}

export function str(o: Json, field: string, opts: { required: true; max?: number }): string;
export function str(o: Json, field: string, opts?: { required?: false; max?: number }): string | undefined;
export function str(o: Json, field: string, opts: { required?: boolean; max?: number } = {}): string | undefined {
  const v = o[field];
  if (v === undefined || v === null) {
    if (opts.required) throw invalidArgs(`${field} is required.`);
    return undefined;
  }
  if (typeof v !== 'string') throw invalidArgs(`${field} must be a string.`);
  if (opts.required && v.trim() === '') throw invalidArgs(`${field} must not be empty.`);
  if (opts.max !== undefined && v.length > opts.max) throw invalidArgs(`${field} is longer than ${opts.max} characters.`);
  return v;
}

export function num(o: Json, field: string, opts: { min?: number; integer?: boolean } = {}): number | undefined {
  const v = o[field];
  if (v === undefined || v === null) return undefined;
  // The official CLI sends some numbers as strings; accept numeric strings like the service.
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw invalidArgs(`${field} must be a number.`);
  if (opts.integer && !Number.isInteger(n)) throw invalidArgs(`${field} must be an integer.`);
  if (opts.min !== undefined && n < opts.min) throw invalidArgs(`${field} must be at least ${opts.min}.`);
  return n;
}

export function bool(o: Json, field: string): boolean | undefined {
  const v = o[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalidArgs(`${field} must be a boolean.`);
  return v;
}

export function stringArray(o: Json, field: string): string[] | undefined {
  const v = o[field];
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw invalidArgs(`${field} must be an array of strings.`);
  return v as string[];
}

/** A positive integer path parameter such as an instance id. */
export function idParam(params: Record<string, string>, name: string): number {
  const raw = params[name] ?? '';
  if (!/^\d{1,15}$/.test(raw)) throw invalidArgs(`${name} must be a positive integer, got "${raw.slice(0, 40)}".`);
  return Number(raw);
}
