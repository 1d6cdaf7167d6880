// The one place where a record as the service sends it becomes a record as berth reads it, before
// its shape is checked (./records.ts, ./record-items.ts). No other module sees these quirks:
//
// - Strings are trimmed, at any depth. Real records carry padded strings (show_instance.yaml's own
//   example: `local_ipaddrs: "10.2.202.31 172.17.0.1 \n"`), and the official CLI strips every string
//   of every instance row since 2024 (vast-cli `vastai/api/instances.py`, `_strip_strings`). A
//   `public_ipaddr` of `"203.0.113.7\n"` would otherwise fail every SSH probe (ENOTFOUND) and print
//   the newline in the SSH line (issue #30, case 1).
// - A negative figure means unknown and becomes null: the docs use -1 for `disk_util`,
//   `disk_usage` and `direct_port_start/end`, and the CLI shows `gpu_util` only when it is >= 0. A
//   `gpu_util` of -1 read as a number would be "idle" and end in a destroy for want of a figure
//   (issue #30, case 2).
// - A port mapping's `HostPort` is documented as a string ("40022"); a number is the same port and
//   is given as its string. `ports` as a list (show_instance.yaml's own example: `"ports": [8080,
//   8081]`, the container's exposed ports) maps no host port: it is read as no mapping (null). No other number is read from a string: where the docs type a field as a
//   number, a string there is a malformed field (set to null by ./record-items.ts, reported).
//
// Only plain JSON values come in (the body was JSON.parse'd), so the walk needs no cycle check.

/** Instance figures where a negative value means "unknown" (show_instances.yaml, vast-cli). */
const UNKNOWN_WHEN_NEGATIVE = [
  'gpu_util',
  'gpu_temp',
  'cpu_util',
  'mem_usage',
  'mem_limit',
  'vmem_usage',
  'disk_util',
  'disk_usage',
  'direct_port_start',
  'direct_port_end',
] as const;

/** Every string of `value` trimmed, at any depth; other values as they are. */
function trimStrings(value: unknown): unknown {
  if (typeof value === 'string') return value.trim();
  if (Array.isArray(value)) return value.map(trimStrings);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = trimStrings(v);
    return out;
  }
  return value;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** `{"22/tcp": [{"HostPort": 40022}]}` → `"40022"`, as documented; anything else untouched. */
function portsAsDocumented(ports: unknown): unknown {
  if (Array.isArray(ports)) return null;
  if (!isRecord(ports)) return ports;
  const out: Record<string, unknown> = {};
  for (const [port, bindings] of Object.entries(ports)) {
    out[port] = Array.isArray(bindings)
      ? bindings.map((b) =>
          isRecord(b) && typeof b['HostPort'] === 'number' && Number.isInteger(b['HostPort'])
            ? { ...b, HostPort: String(b['HostPort']) }
            : b,
        )
      : bindings;
  }
  return out;
}

/** An instance record (list or show) in berth's shape; a value that is not a record is left as is. */
export function normalizeInstance(raw: unknown): unknown {
  if (!isRecord(raw)) return raw;
  const record = trimStrings(raw) as Record<string, unknown>;
  for (const field of UNKNOWN_WHEN_NEGATIVE) {
    const v = record[field];
    if (typeof v === 'number' && v < 0) record[field] = null;
  }
  if ('ports' in record) record['ports'] = portsAsDocumented(record['ports']);
  return record;
}

/** An offer record in berth's shape: strings trimmed (a price that is not a number stays unusable). */
export function normalizeOffer(raw: unknown): unknown {
  return isRecord(raw) ? trimStrings(raw) : raw;
}
