// The `quirks` of the simulator's config: instance records as the real service sends them, padded
// strings and -1 for unknown figures (issue #30). Only the answer on the wire changes; the world,
// and what filters and sorts compare, is untouched.
import type { QuirksConfig, RateGroup } from './config.js';

/** What `padded_strings` appends: a space and a newline, as the docs' own example ends. */
const PAD = ' \n';

/** Figures the docs send as -1 when unknown (show_instances.yaml: disk_util, disk_usage; the CLI's gpu_util >= 0). */
const MINUS_ONE_WHEN_UNKNOWN = ['gpu_util', 'disk_util', 'disk_usage'] as const;

type InstanceRecord = Record<string, unknown>;

function pad(value: unknown): unknown {
  if (typeof value === 'string') return value + PAD;
  if (Array.isArray(value)) return value.map(pad);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, pad(v)]));
  return value;
}

function quirkRecord(record: InstanceRecord, quirks: QuirksConfig): InstanceRecord {
  let out = record;
  if (quirks.unknown_as_minus_one) {
    out = { ...out };
    // Only fields the record carries: a v1 list's `select_cols` leaves the others out.
    for (const field of MINUS_ONE_WHEN_UNKNOWN) if (field in out && out[field] === null) out[field] = -1;
  }
  if (quirks.padded_strings) out = pad(out) as InstanceRecord;
  return out;
}

function isRecord(v: unknown): v is InstanceRecord {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Whether any record quirk is on (the answer is then rewritten). */
function recordQuirksOn(quirks: QuirksConfig): boolean {
  return quirks.padded_strings || quirks.unknown_as_minus_one;
}

/** The answer with its instance records sent the way `quirks` says (a copy; the original is kept). */
export function quirkInstanceRecords(group: RateGroup, body: unknown, quirks: QuirksConfig): unknown {
  if (!isRecord(body) || !recordQuirksOn(quirks)) return body;
  if ((group === 'list_v0' || group === 'list_v1') && Array.isArray(body.instances)) {
    return { ...body, instances: body.instances.map((r) => (isRecord(r) ? quirkRecord(r, quirks) : r)) };
  }
  if (group === 'show' && isRecord(body.instances)) return { ...body, instances: quirkRecord(body.instances, quirks) };
  return body;
}
