// Shape checks for what the service returns. Only the fields berth relies on are checked, extra
// fields pass through untouched; a body of the wrong shape becomes BerthError('bad_response') here,
// naming what was wrong, instead of an `undefined` deep inside a run later.
import { z } from 'zod';
import { BerthError } from '../errors.js';
import type { CurrentUser, Instance, Offer } from './types.js';

const id = z.number().int();
const nullableString = z
  .string()
  .nullish()
  .transform((v) => v ?? null);
const nullableNumber = z
  .number()
  .nullish()
  .transform((v) => v ?? null);

export const offerSchema = z.looseObject({
  id,
  machine_id: z.number(),
  gpu_name: z.string(),
  num_gpus: z.number(),
  gpu_ram: z.number(),
  dph_total: z.number(),
  verified: z.boolean().optional(),
  direct_port_count: z.number().optional(),
});

export const instanceSchema = z.looseObject({
  id,
  label: nullableString,
  machine_id: nullableNumber,
  actual_status: nullableString,
  intended_status: z.string().nullish(),
  cur_state: z.string().nullish(),
  status_msg: z.string().nullish(),
  ssh_host: z.string().nullish(),
  ssh_port: z.number().nullish(),
  dph_total: z.number().nullish(),
  public_ipaddr: z.string().nullish(),
  // Only the shape berth reads; anything else in a mapping is let through untouched.
  ports: z
    .record(z.string(), z.array(z.looseObject({ HostIp: z.string().optional(), HostPort: z.string().optional() })).nullable())
    .nullish(),
});

// Lists are checked in two steps: the answer's own shape here (an answer without its list is
// malformed as a whole), then each item on its own (./record-items.ts), so that one bad record is
// left out instead of failing the whole answer.
export const searchResponseSchema = z.looseObject({ offers: z.array(z.unknown()) });
/** One page of `GET /api/v1/instances/`; `instances: null` is an empty page (the official clients read it so). */
export const listV1ResponseSchema = z.looseObject({
  instances: z
    .array(z.unknown())
    .nullish()
    .transform((v) => v ?? []),
  next_token: z.union([z.string(), z.number()]).nullish(),
  total_instances: z.number().int().nonnegative().nullish(),
});
export const showResponseSchema = z.looseObject({ instances: z.unknown().refine((v) => v !== undefined, 'Required') });
export const createResponseSchema = z.looseObject({
  new_contract: id,
  instance_api_key: z.string().optional(),
});
export const currentUserSchema = z.looseObject({ id: id.optional(), email: z.string().optional(), credit: z.number().optional() });
/**
 * One pending price increase (vast-cli `vastai/api/price_increase.py`, not in the docs yet): the
 * host's new and old $/s for GPU and disk/RAM; null means that part does not change.
 */
export const pendingPriceIncreaseSchema = z.looseObject({
  pending_price_increase_id: id,
  contract_id: id,
  new_gpu_costpersec: z.number().nullish(),
  old_gpu_costpersec: z.number().nullish(),
  new_disk_ram_costpersec: z.number().nullish(),
  old_disk_ram_costpersec: z.number().nullish(),
  new_platform_fee: z.number().nullish(),
  old_platform_fee: z.number().nullish(),
  contract_end_date: z.number().nullish(),
  created_at: z.number().nullish(),
});
/** The envelope: rows are checked one by one (a malformed row is dropped, not the answer). */
export const pendingPriceIncreasesResponseSchema = z.looseObject({
  count: z.number().optional(),
  truncated: z.boolean().optional(),
  pending_price_increases: z.array(z.unknown()).nullish(),
});
/** show_ssh_keys.yaml: a bare array of key records. */
export const sshKeysResponseSchema = z.array(z.unknown());
export const sshKeySchema = z.looseObject({ id });
/** show_connections.yaml: a bare array of `{id, cloud_type, name}`. */
export const cloudConnectionsResponseSchema = z.array(z.unknown());
export const cloudConnectionSchema = z.looseObject({ id, name: z.string(), cloud_type: z.string().nullish() });
/** One contract of show_charges.yaml: `source` is `instance-<id>`, `amount` its $ over the days asked (3 decimals). */
export const chargeSchema = z.looseObject({
  source: z.string(),
  amount: z.number(),
  type: z.string().optional(),
  start: z.number().optional(),
  end: z.number().optional(),
});
export const chargesResponseSchema = z.looseObject({ results: z.array(z.unknown()), next_token: z.string().nullish() });
/** logs.yaml: the log is uploaded to `result_url` (fetched without the key, like a pre-signed S3 URL). */
export const requestLogsResponseSchema = z.looseObject({ result_url: z.string().url() });
export const secretsResponseSchema = z.looseObject({ secrets: z.record(z.string(), z.unknown()) });
const webhookSchema = z.looseObject({ id, webhook_secret: z.string() });
export const rotateSecretResponseSchema = z.looseObject({ webhook: webhookSchema });
/** The API-key record's shape is not documented: require only a numeric id. */
export const apiKeyResponseSchema = z.looseObject({ id: id.optional(), key: z.string().optional() });

/**
 * Parses `body` or throws bad_response naming the first problems. zod's messages name paths and
 * expected types, never the values, so no secret from a body ends up in the message.
 */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown, what: string): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issues = result.error.issues
    .slice(0, 3)
    .map((i) => `${i.path.length ? i.path.join('.') : '(body)'}: ${i.message}`)
    .join('; ');
  const kind = typeof body === 'string' ? ' (the body was not JSON)' : '';
  throw new BerthError('bad_response', `Unexpected response to ${what}${kind}: ${issues}`);
}

// Compile-time checks that the parsed records fit the public types.
type ParsedOffer = z.output<typeof offerSchema>;
type ParsedInstance = z.output<typeof instanceSchema>;
const _offerFits = (o: ParsedOffer): Offer => o;
const _instanceFits = (i: ParsedInstance): Instance => i;
const _userFits = (u: z.output<typeof currentUserSchema>): CurrentUser => u;
void _offerFits;
void _instanceFits;
void _userFits;
