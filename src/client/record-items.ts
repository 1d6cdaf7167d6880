// One bad record must not cost the whole answer. A search whose 64 offers include one with
// `"dph_total": "0.5"` still has 63 usable offers; a list page with one unreadable instance still
// says where the others are. So the items of a list are checked one by one:
//
// - an offer (or a charge, an SSH key, a secret) that fails its schema is left out: berth cannot
//   price, filter or count it, and the rest of the answer stands;
// - an instance record keeps its place when its id can be read: the fields that fail are set to
//   null (unknown), as the service itself sends a field it does not know. Leaving the record out
//   would tell its run that the instance vanished (three such lists and the run takes it for lost
//   and replaces it), and a sweep that the account holds one instance fewer. Only a record without
//   a readable id is left out: nothing can be done with it.
//
// What was left out or repaired is returned, so that the client reports it (an event, counted in
// /metrics). The issues name paths and expected types from zod, never the values.
import type { z } from 'zod';
import { BerthError } from '../errors.js';
import { normalizeInstance } from './normalize.js';
import { instanceSchema } from './records.js';
import type { Instance } from './types.js';

const ISSUES_KEPT = 3;

function issueText(where: string, id: unknown, issues: readonly z.core.$ZodIssue[]): string {
  // Only a numeric id is named: anything else the service sent is a value, and values are not quoted.
  const named = typeof id === 'number' && Number.isFinite(id) ? ` (id ${id})` : '';
  const what = issues
    .slice(0, 2)
    .map((i) => `${i.path.length ? i.path.join('.') : '(record)'}: ${i.message}`)
    .join('; ');
  return `${where}${named}: ${what}`;
}

function idOf(raw: unknown): unknown {
  return raw !== null && typeof raw === 'object' ? (raw as { id?: unknown }).id : undefined;
}

/** What one answer held that could not be read as is. */
export class ItemReport {
  /** Items left out. */
  dropped = 0;
  /** Instance records kept with their unreadable fields set to null. */
  repaired = 0;
  /** The first few problems: `offers[3] (id 123): dph_total: expected number`. */
  readonly issues: string[] = [];

  get any(): boolean {
    return this.dropped + this.repaired > 0;
  }

  note(kind: 'dropped' | 'repaired', where: string, raw: unknown, issues: readonly z.core.$ZodIssue[]): void {
    this[kind]++;
    if (this.issues.length < ISSUES_KEPT)
      this.issues.push(`${issueText(where, idOf(raw), issues)}${kind === 'repaired' ? ' (set to null)' : ''}`);
  }
}

/** The items of `list` that fit `schema`; the others are left out and noted in `report`. */
export function keepValid<S extends z.ZodType>(schema: S, list: readonly unknown[], where: string, report: ItemReport): z.output<S>[] {
  const kept: z.output<S>[] = [];
  list.forEach((raw, i) => {
    const parsed = schema.safeParse(raw);
    if (parsed.success) kept.push(parsed.data);
    else report.note('dropped', `${where}[${i}]`, raw, parsed.error.issues);
  });
  return kept;
}

/**
 * An instance record as berth can use it: as sent when it fits, else with each unreadable field set
 * to null; undefined when it is not a record or its id cannot be read.
 */
function salvageInstance(sent: unknown, where: string, report: ItemReport): Instance | undefined {
  const raw = normalizeInstance(sent);
  const parsed = instanceSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues;
  const fields = new Set(issues.map((i) => i.path[0]));
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || fields.has(undefined) || fields.has('id')) {
    report.note('dropped', where, raw, issues);
    return undefined;
  }
  const nulled: Record<string, unknown> = { ...(raw as Record<string, unknown>) };
  for (const f of fields) nulled[String(f)] = null;
  const again = instanceSchema.safeParse(nulled);
  if (!again.success) {
    report.note('dropped', where, raw, issues);
    return undefined;
  }
  report.note('repaired', where, raw, issues);
  return again.data;
}

/** The instance records of a list: each kept (repaired if need be) unless its id cannot be read. */
export function keepInstances(list: readonly unknown[], where: string, report: ItemReport): Instance[] {
  const kept: Instance[] = [];
  list.forEach((raw, i) => {
    const inst = salvageInstance(raw, `${where}[${i}]`, report);
    if (inst) kept.push(inst);
  });
  return kept;
}

/**
 * The one record of `GET /api/v0/instances/{id}/` (null: not found). Its unreadable fields are set
 * to null; a record whose id cannot be read is the answer itself malformed: bad_response.
 */
export function oneInstance(raw: unknown, what: string, report: ItemReport): Instance | null {
  if (raw === null) return null;
  const inst = salvageInstance(raw, 'instances', report);
  if (inst) return inst;
  throw new BerthError('bad_response', `Unexpected response to ${what}: ${report.issues.at(-1) ?? 'instances: not a record'}`);
}
