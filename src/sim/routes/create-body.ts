// The body of a create (`PUT /api/v0/asks/{id}/`), checked against create_instance.yaml's
// x-input-validation and enums before anything happens. Each problem is the documented 400
// (`invalid_args`, `invalid_price`, `no_ssh_key_for_vm`); the route adds the offer's `ask_id`.
//  - image ≤ 1024 (required unless a template gives one), label ≤ 256, disk ≥ 8 GB;
//  - env: the CLI's object {"KEY": "value", "-p 8080:8080": "1"} or the documented Docker-flag
//    string "-e KEY=value -p 8080:8080"; each value ≤ 256 characters, keys and values ≤ 32768 in all;
//  - onstart ≤ 4048, and args + args_str + onstart ≤ 4096 together;
//  - price (a bid) 0.001–128; runtype from the documented enum, combined with spaces as the CLI
//    does ("ssh_direc ssh_proxy"); target_state running|stopped; cancel_unavail a boolean.
// Fields the CLI sends and the simulator does not act on (client_id, image_login, force, user,
// python_utf8, lang_utf8, use_jupyter_lab, jupyter_dir, extra, volume_info) are accepted.
import type { CreateParams } from '../instances.js';
import { MIN_DISK_GB } from '../pricing.js';
import { invalidArgs, invalidPrice, SimHttpError } from '../sim-error.js';
import type { TemplateRecord } from '../templates.js';
import { bool, num, str, type Json } from '../validate.js';

export const IMAGE_MAX = 1024;
const LABEL_MAX = 256;
const ENV_VALUE_MAX = 256;
const ENV_TOTAL_MAX = 32_768;
export const ONSTART_MAX = 4048;
export const ARGS_TOTAL_MAX = 4096;
const PRICE_MIN = 0.001;
const PRICE_MAX = 128;
/** create_instance.yaml's runtype enum, plus the CLI's `_direc` spelling of `_direct`. */
const RUNTYPE_TOKENS = new Set([
  'ssh',
  'jupyter',
  'args',
  'ssh_proxy',
  'ssh_direct',
  'ssh_direc',
  'jupyter_proxy',
  'jupyter_direct',
  'jupyter_direc',
]);

export interface CreateRequest {
  params: CreateParams;
  targetState: 'running' | 'stopped';
  /** null: the documented default applies (the route decides it). */
  cancelUnavail: boolean | null;
}

export function parseCreateBody(body: Json, template: (hashId: string) => TemplateRecord | undefined, hasSshKey: boolean): CreateRequest {
  const hash = str(body, 'template_hash_id');
  const tpl = hash === undefined ? undefined : template(hash);
  if (hash !== undefined && !tpl) throw invalidArgs(`template_hash_id ${hash} is not a template of this account.`);

  const image = str(body, 'image', { max: IMAGE_MAX }) ?? (tpl ? templateImage(tpl) : undefined);
  if (image === undefined || image.trim() === '') throw invalidArgs('image is required (or a template_hash_id that gives one).');
  if (image.length > IMAGE_MAX) throw invalidArgs(`image is longer than ${IMAGE_MAX} characters.`);
  const label = str(body, 'label', { max: LABEL_MAX }) ?? null;
  const disk = num(body, 'disk') ?? tpl?.recommended_disk_space ?? MIN_DISK_GB;
  if (disk < MIN_DISK_GB) throw invalidArgs(`disk must be at least ${MIN_DISK_GB} GB, got ${disk}.`);

  const envPairs = mergeEnv(tpl ? parseEnvFlags(tpl.env) : [], parseEnv(body.env));
  checkEnvSizes(envPairs, typeof body.env === 'string' ? body.env.length : undefined);

  const onstart = str(body, 'onstart') ?? tpl?.onstart ?? '';
  if (onstart.length > ONSTART_MAX) {
    throw invalidArgs(`onstart is ${onstart.length} characters; the limit is ${ONSTART_MAX} (gzip and base64 longer scripts).`);
  }
  const args = stringList(body, 'args');
  const argsStr = str(body, 'args_str') ?? '';
  const argsTotal = args.join(' ').length + argsStr.length + onstart.length;
  if (argsTotal > ARGS_TOTAL_MAX)
    throw invalidArgs(`args, args_str and onstart are ${argsTotal} characters together; the limit is ${ARGS_TOTAL_MAX}.`);

  const runtype = str(body, 'runtype') ?? tpl?.runtype ?? (args.length > 0 || argsStr !== '' ? 'args' : 'ssh');
  checkRuntype(runtype);

  const rawPrice = num(body, 'price');
  if (rawPrice !== undefined && (rawPrice < PRICE_MIN || rawPrice > PRICE_MAX)) {
    throw invalidPrice(`price must be from ${PRICE_MIN} to ${PRICE_MAX} $/h, got ${rawPrice}.`);
  }
  const targetState = str(body, 'target_state') ?? 'running';
  if (targetState !== 'running' && targetState !== 'stopped')
    throw invalidArgs(`target_state must be "running" or "stopped", got "${targetState}".`);
  const cancelUnavail = bool(body, 'cancel_unavail') ?? null;
  if (bool(body, 'vm') === true && !hasSshKey) {
    throw new SimHttpError(400, {
      success: false,
      error: 'no_ssh_key_for_vm',
      msg: 'error 400/3470: A VM instance needs an SSH key on the account before it is created.',
    });
  }
  str(body, 'client_id');

  const env = Object.fromEntries(envPairs.filter(([k]) => !k.startsWith('-')));
  const ports = envPairs.filter(([k]) => k.startsWith('-p ')).map(([k]) => containerPort(k.slice(3)));
  return {
    params: {
      image,
      disk,
      label,
      env,
      envPairs,
      onstart,
      args: argsStr === '' ? args : [...args, argsStr],
      runtype,
      template_hash_id: tpl?.hash_id ?? null,
      template_id: tpl?.id ?? null,
      price: rawPrice ?? null,
      ports: [...new Set(ports)],
    },
    targetState,
    cancelUnavail,
  };
}

export function templateImage(t: TemplateRecord): string {
  return t.image.includes(':') || t.tag === '' ? t.image : `${t.image}:${t.tag}`;
}

/** The CLI's object form, or the documented Docker-flag string; absent/null is no env. */
export function parseEnv(v: unknown): Array<[string, string]> {
  if (v === undefined || v === null) return [];
  if (typeof v === 'string') return parseEnvFlags(v);
  if (typeof v !== 'object' || Array.isArray(v))
    throw invalidArgs('env must be an object of strings or a Docker-flag string ("-e KEY=value -p 8080:8080").');
  return Object.entries(v as Json).map(([k, x]) => {
    if (typeof x !== 'string') throw invalidArgs(`env.${k} must be a string.`);
    return [k, x];
  });
}

/** `-e KEY=value` and `-p host:container[/proto]` (plus -h, -v, -n) as the CLI's parse_env reads them. */
export function parseEnvFlags(text: string): Array<[string, string]> {
  const tokens = [...text.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
  const out: Array<[string, string]> = [];
  for (let i = 0; i < tokens.length; i++) {
    const flag = tokens[i]!;
    const arg = tokens[i + 1];
    if (!['-e', '-p', '-h', '-v', '-n'].includes(flag))
      throw invalidArgs(`env: unexpected "${flag.slice(0, 40)}"; use -e KEY=value or -p port:port.`);
    if (arg === undefined) throw invalidArgs(`env: ${flag} needs a value.`);
    i++;
    if (flag === '-e') {
      const eq = arg.indexOf('=');
      if (eq <= 0) throw invalidArgs(`env: -e ${arg.slice(0, 40)} is not KEY=value.`);
      out.push([arg.slice(0, eq), arg.slice(eq + 1)]);
    } else if (flag === '-p') {
      if (!/^[0-9:]+(\/(tcp|udp))?$/.test(arg)) throw invalidArgs(`env: -p ${arg.slice(0, 40)} is not a port mapping.`);
      out.push([`-p ${arg}`, '1']);
    } else {
      out.push([`${flag} ${arg}`, '1']);
    }
  }
  return out;
}

/** Template env first; a request key replaces the template's (create_instance.yaml precedence rules). */
export function mergeEnv(base: Array<[string, string]>, request: Array<[string, string]>): Array<[string, string]> {
  const merged = new Map(base);
  for (const [k, v] of request) merged.set(k, v);
  return [...merged];
}

export function checkEnvSizes(pairs: Array<[string, string]>, flagStringLength: number | undefined): void {
  const long = pairs.find(([, v]) => v.length > ENV_VALUE_MAX);
  if (long) throw invalidArgs(`env value of ${long[0].slice(0, 64)} is ${long[1].length} characters; the limit is ${ENV_VALUE_MAX}.`);
  const total = flagStringLength ?? pairs.reduce((n, [k, v]) => n + k.length + v.length, 0);
  if (total > ENV_TOTAL_MAX) throw invalidArgs(`env is ${total} characters in all; the limit is ${ENV_TOTAL_MAX}.`);
}

function checkRuntype(runtype: string): void {
  const tokens = runtype.trim().split(/\s+/);
  const bad = tokens.find((t) => !RUNTYPE_TOKENS.has(t));
  if (bad !== undefined || runtype.trim() === '') {
    throw invalidArgs(
      `runtype "${runtype.slice(0, 64)}" is not one of ssh, ssh_proxy, ssh_direct, jupyter, jupyter_proxy, jupyter_direct, args.`,
    );
  }
  if (tokens.includes('args') && tokens.length > 1) throw invalidArgs('runtype args cannot be combined with ssh or jupyter.');
}

function stringList(o: Json, field: string): string[] {
  const v = o[field];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw invalidArgs(`${field} must be an array of strings.`);
  return v as string[];
}

/** "8080:8080" → "8080/tcp"; "8081:8081/udp" → "8081/udp"; the container side is after the colon. */
function containerPort(mapping: string): string {
  const [ports, proto = 'tcp'] = mapping.split('/');
  return `${ports!.split(':').at(-1)}/${proto}`;
}
