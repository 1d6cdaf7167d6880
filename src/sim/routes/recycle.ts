// Making an instance's container again: recycle and update_template.
//
// Recycle, `PUT /api/v0/instances/recycle/{id}/` (recycle_instance.yaml): "Destroys and recreates
// container in place (from newly pulled image) without losing GPU priority. Updates container
// status to 'recycling'"; answers `{success: true}`. An instance (or container) that is not there
// is documented as 400 `{success: false, error: "invalid_id", msg: "Invalid instance id."}`, while
// the spec generated from the server's code (vast-ai/docs branch auto/openapi-preview-pr-5363,
// auto_put_api_v0_instances_recycle_id_9748b1.yaml) answers it 200 with the same body: which one is
// `quirks.recycle_refused_status` (200 by default: a client that reads the status alone is fooled).
// The simulator also refuses, in the same form, what the docs leave open: a stopped instance (it
// has no GPU to keep; start it first) and one whose machine is offline (no host to run docker on).
// The instance's own key may not call either (the seed: it "can only start, stop or destroy"; the
// server refuses it on routes without `instanceKey`).
//
// Update, `PUT /api/v0/instances/update_template/{id}/` (no yaml; the preview spec
// auto_put_api_v0_instances_update_template_id_5f7bad.yaml, and the official client's
// `update_instance`, vast-cli vastai/api/instances.py, which sends `{id, template_id,
// template_hash_id, image, args, env, onstart}`): sets what the container is made from (image,
// onstart, args; a template's image and onstart, `template_hash_id` before `template_id`), and with
// `recycle: true` recycles in the same call, answering "the recycle response {success: true/false}".
// Strict readings where nothing is documented (docs/choices.md, "Recycle and update_template"):
//   - without `recycle` the change waits for the next recycle; a reboot or a start keeps the
//     container, and so what it was made from;
//   - `env` changes nothing unless `quirks.update_env_applies` (unverified: the preview lists no
//     `env`); `disk` is checked (≥ 8 GB, the preview's minimum) and not applied: the contract's disk
//     and its price stay; `image_login` is accepted; the runtype and ports are the contract's;
//   - a missing instance is the preview's 404 `not_found`; an unknown template, a 200
//     `{success: false}` with nothing changed; a field of the wrong type or size, create's 400;
//   - with `recycle: true` on an instance that cannot be recycled, the update is kept and the answer
//     is the recycle's refusal, always on a 200 (the update was done).
// The `unsuccessful_200_rate` fault answers both 200 `{success: false}` before anything is done.
import type { LiveInstance, PendingTemplate } from '../instances.js';
import type { Route, RouteContext, RouteResult } from '../route.js';
import { MIN_DISK_GB } from '../pricing.js';
import { invalidArgs, SimHttpError } from '../sim-error.js';
import type { TemplateRecord } from '../templates.js';
import { bodyObject, bool, idParam, num, str, type Json } from '../validate.js';
import { ARGS_TOTAL_MAX, checkEnvSizes, IMAGE_MAX, mergeEnv, ONSTART_MAX, parseEnv, parseEnvFlags, templateImage } from './create-body.js';

const UNSUCCESSFUL = { success: false, error: 'request_failed', msg: 'error 200/3999: The request could not be completed; try again.' };

const INVALID_ID = 'Invalid instance id.';

/** Why the instance cannot be recycled now (its error code and words), or null when it can. */
function unrecyclable(inst: LiveInstance): { error: string; msg: string } | null {
  const id = inst.hist.id;
  if (inst.intended === 'stopped' || inst.status === 'stopped') {
    return { error: 'invalid_args', msg: `Instance ${id} is stopped; start it before recycling it.` };
  }
  if (inst.status === 'offline') return { error: 'invalid_args', msg: `The machine of instance ${id} is offline.` };
  return null;
}

function refused(status: 200 | 400, error: string, msg: string): RouteResult {
  return { status, body: { success: false, error, msg } };
}

function recycle(ctx: RouteContext): RouteResult {
  const status = ctx.world.config.quirks.recycle_refused_status;
  const inst = ctx.world.instances.get(idParam(ctx.params, 'id'));
  if (!inst) return refused(status, 'invalid_id', INVALID_ID);
  const why = unrecyclable(inst);
  if (why) return refused(status, why.error, why.msg);
  if (ctx.world.faults.unsuccessful()) return { body: UNSUCCESSFUL };
  ctx.world.instances.recycle(inst);
  return { body: { success: true } };
}

/** The preview spec's 404 for an instance the caller has not. */
const updateNotFound = () =>
  new SimHttpError(404, { success: false, error: 'not_found', msg: "Instance not found or you don't have permission to modify it" });

/** The template the body names (`template_hash_id` first, as the preview says), undefined for none; null: named but unknown. */
function namedTemplate(ctx: RouteContext, body: Json): TemplateRecord | null | undefined {
  const hash = str(body, 'template_hash_id');
  if (hash !== undefined) return ctx.world.templates.findByHash(hash) ?? null;
  const id = num(body, 'template_id', { integer: true, min: 1 });
  if (id !== undefined) return ctx.world.templates.get(id) ?? null;
  return undefined;
}

/** `args` as the official client sends it (one string, `--args`) or as a create's list. */
function argsOf(body: Json): string[] | undefined {
  const v = body.args;
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
  throw invalidArgs('args must be a string or an array of strings.');
}

/** The changes the body asks for, checked like a create's fields; null when its template is unknown. */
function changesOf(ctx: RouteContext, inst: LiveInstance, body: Json): PendingTemplate | null {
  const tpl = namedTemplate(ctx, body);
  if (tpl === null) return null;
  const changes: PendingTemplate = {};
  const image = str(body, 'image', { max: IMAGE_MAX }) ?? (tpl ? templateImage(tpl) : undefined);
  if (image !== undefined && image.trim() === '') throw invalidArgs('image must not be empty.');
  if (image !== undefined) changes.image = image;
  const onstart = str(body, 'onstart') ?? tpl?.onstart;
  if (onstart !== undefined && onstart.length > ONSTART_MAX) {
    throw invalidArgs(`onstart is ${onstart.length} characters; the limit is ${ONSTART_MAX} (gzip and base64 longer scripts).`);
  }
  if (onstart !== undefined) changes.onstart = onstart;
  const args = argsOf(body);
  if (args !== undefined) changes.args = args;
  const total =
    (args ?? inst.pending?.args ?? inst.params.args).join(' ').length + (onstart ?? inst.pending?.onstart ?? inst.params.onstart).length;
  if (total > ARGS_TOTAL_MAX) throw invalidArgs(`args and onstart are ${total} characters together; the limit is ${ARGS_TOTAL_MAX}.`);
  const disk = num(body, 'disk');
  if (disk !== undefined && disk < MIN_DISK_GB) throw invalidArgs(`disk must be at least ${MIN_DISK_GB} GB, got ${disk}.`);
  str(body, 'image_login');
  const env = mergeEnv(tpl ? parseEnvFlags(tpl.env) : [], parseEnv(body.env)).filter(([k]) => !k.startsWith('-'));
  checkEnvSizes(env, undefined);
  if (tpl) {
    changes.template_hash_id = tpl.hash_id;
    changes.template_id = tpl.id;
  }
  if (ctx.world.config.quirks.update_env_applies && (body.env !== undefined || tpl)) {
    // The contract's port mappings (`-p` entries) stay: only the variables change.
    changes.env = Object.fromEntries(env);
    changes.envPairs = [...inst.params.envPairs.filter(([k]) => k.startsWith('-')), ...env];
  }
  return changes;
}

function updateTemplate(ctx: RouteContext): RouteResult {
  const body = bodyObject(ctx.body, true);
  const inst = ctx.world.instances.get(idParam(ctx.params, 'id'));
  if (!inst) throw updateNotFound();
  const changes = changesOf(ctx, inst, body);
  const recycleToo = bool(body, 'recycle') === true;
  if (changes === null) return refused(200, 'invalid_args', 'The template given is not a template of this account.');
  if (ctx.world.faults.unsuccessful()) return { body: UNSUCCESSFUL };
  ctx.world.instances.setPending(inst, changes);
  if (!recycleToo) return { body: { success: true } };
  const why = unrecyclable(inst);
  if (why) return refused(200, why.error, why.msg);
  ctx.world.instances.recycle(inst);
  return { body: { success: true } };
}

export const recycleRoutes: Route[] = [
  {
    method: 'PUT',
    path: '/api/v0/instances/recycle/{id}',
    auth: 'key',
    category: 'instance_write',
    group: 'recycle',
    limited: 'detail', // recycle_instance.yaml: 429 {"detail": "API requests too frequent endpoint threshold=1.0"}
    handler: recycle,
  },
  {
    method: 'PUT',
    path: '/api/v0/instances/update_template/{id}',
    auth: 'key',
    category: 'instance_write',
    group: 'update_template',
    limited: 'plain', // no yaml shows one: the rate-limit page's "often plain text"
    handler: updateTemplate,
  },
];
