// Builds the one Config the process runs with: defaults (config/default.json) < the user's file
// (--config, partial is fine) < environment < command-line flags, merged once and validated once.
// This is the only module that reads process.env.
import { countText } from '../count-text.js';
import { readFileSync } from 'node:fs';
import { ConfigError, isNonFiniteNumber, NOT_FINITE_MESSAGE } from '../errors.js';
import { packagePath } from '../package-path.js';
import { berthHome } from './home.js';
import { configSchema, RESERVED_KEYS, type Config } from './schema.js';

export interface ConfigFlags {
  /** --config FILE */
  configFile?: string | undefined;
  /** --listen HOST:PORT */
  listen?: string | undefined;
  /** Values set programmatically (tests, demo); applied after the file, before the environment. */
  overrides?: DeepPartial<Config> | undefined;
}

export type DeepPartial<T> = T extends readonly unknown[] ? T : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;

interface Environment {
  /** BERTH_HOME: the daemon's and CLI's shared directory. */
  home: string;
  /** BERTH_API_KEY, or the content of BERTH_API_KEY_FILE / service.api_key_file. */
  apiKey: string | undefined;
  /** BERTH_WEBHOOK_SECRET, or the content of BERTH_WEBHOOK_SECRET_FILE / webhooks.secret_file: the service's webhook signing secret. */
  webhookSecret?: string | undefined;
  /** The value of every variable a `notify[].secret_env` names (secrets: never logged). */
  notifySecrets: Record<string, string>;
}

export interface LoadedConfig {
  config: Config;
  env: Environment;
}

type Json = Record<string, unknown>;

function isPlainObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Objects merge key by key; arrays and scalars replace. A `__proto__` key is refused, not merged into the prototype. */
function deepMerge(base: Json, over: Json, path = ''): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) continue;
    if (RESERVED_KEYS.has(k))
      throw new ConfigError(
        `Invalid configuration: ${path}${k}: is a reserved name (__proto__, constructor, prototype), not a setting.`,
        `${path}${k}`,
      );
    out[k] = isPlainObject(v) && isPlainObject(out[k]) ? deepMerge(out[k] as Json, v, `${path}${k}.`) : v;
  }
  return out;
}

function readJsonFile(path: string, what: string): Json {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`Cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`, undefined, err);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${what} ${path} is not valid JSON: ${(err as Error).message}.`, undefined, err);
  }
  if (!isPlainObject(parsed)) throw new ConfigError(`${what} ${path} must hold a JSON object.`);
  return parsed;
}

function defaultConfigJson(): Json {
  return readJsonFile(packagePath('config', 'default.json'), 'default config');
}

/** Validates a merged config object, naming the first bad field and the expected form. */
function parseConfig(raw: unknown): Config {
  const result = configSchema.safeParse(raw, {
    error: (iss) => (iss.code === 'invalid_type' && isNonFiniteNumber(iss.input) ? NOT_FINITE_MESSAGE : undefined),
  });
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.join('.');
  throw new ConfigError(
    `Invalid configuration: ${field || '(root)'}: ${issue.message}.` +
      (result.error.issues.length > 1 ? ` (${countText(result.error.issues.length - 1, 'more problem')})` : ''),
    field,
  );
}

function readKeyFile(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (err) {
    throw new ConfigError(
      `Cannot read the API key file ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`,
      'service.api_key_file',
      err,
    );
  }
}

export function loadConfig(flags: ConfigFlags = {}, processEnv: NodeJS.ProcessEnv = process.env): LoadedConfig {
  let merged = defaultConfigJson();
  if (flags.configFile) merged = deepMerge(merged, readJsonFile(flags.configFile, 'config file'));
  if (flags.overrides) merged = deepMerge(merged, flags.overrides as Json);
  if (processEnv.BERTH_API_URL) merged = deepMerge(merged, { service: { base_url: processEnv.BERTH_API_URL } });
  if (processEnv.BERTH_STORE_URL) merged = deepMerge(merged, { store: { url: processEnv.BERTH_STORE_URL } });
  if (processEnv.BERTH_LISTEN) merged = deepMerge(merged, { daemon: { listen: processEnv.BERTH_LISTEN } });
  if (flags.listen) merged = deepMerge(merged, { daemon: { listen: flags.listen } });
  const config = parseConfig(merged);

  const keyFile = processEnv.BERTH_API_KEY_FILE ?? config.service.api_key_file;
  const fromEnv = processEnv.BERTH_API_KEY?.trim();
  const fromFile = !fromEnv && keyFile ? readKeyFile(keyFile) : '';
  const apiKey = fromEnv ? checkApiKey(fromEnv, 'BERTH_API_KEY') : fromFile ? checkApiKey(fromFile, keyFile!) : undefined;
  return {
    config,
    env: {
      home: berthHome(processEnv),
      apiKey,
      webhookSecret: webhookSecret(config, processEnv),
      notifySecrets: notifySecrets(config, processEnv),
    },
  };
}

/**
 * The webhook signing secret, read only when the listener is on: from BERTH_WEBHOOK_SECRET, else
 * the file. A listener without a secret could act on anyone's request, so it is refused here.
 */
function webhookSecret(config: Config, processEnv: NodeJS.ProcessEnv): string | undefined {
  if (!config.webhooks.listen) return undefined;
  const file = processEnv.BERTH_WEBHOOK_SECRET_FILE ?? config.webhooks.secret_file;
  let secret = processEnv.BERTH_WEBHOOK_SECRET?.trim();
  if (!secret && file) {
    try {
      secret = readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new ConfigError(
        `Cannot read the webhook secret file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`,
        'webhooks.secret_file',
        err,
      );
    }
  }
  if (!secret) {
    throw new ConfigError(
      'webhooks.listen is set but there is no webhook secret: set BERTH_WEBHOOK_SECRET, or BERTH_WEBHOOK_SECRET_FILE / webhooks.secret_file to a file holding the secret the service returned for the webhook.',
      'webhooks.secret_file',
    );
  }
  return secret;
}

/** A signing key that is named but not set would send unsigned notifications: refused at start. */
function notifySecrets(config: Config, processEnv: NodeJS.ProcessEnv): Record<string, string> {
  const secrets: Record<string, string> = {};
  config.notify.forEach((target, i) => {
    if (target.secret_env === undefined) return;
    const value = processEnv[target.secret_env];
    if (!value) {
      throw new ConfigError(
        `Invalid configuration: notify.${i}.secret_env: the environment variable ${target.secret_env} is not set (it holds the notification signing key).`,
        `notify.${i}.secret_env`,
      );
    }
    secrets[target.secret_env] = value;
  });
  return secrets;
}

/**
 * A key goes into an HTTP header: a space or control character inside it (a pasted newline) would
 * fail every call, so it is refused here with one sentence that does not print the key.
 */
function checkApiKey(key: string, source: string): string {
  if (/^[\x21-\x7e]+$/.test(key)) return key;
  throw new ConfigError(
    `The API key from ${source} contains a space, a line break or another character a key cannot hold: set it to the key alone.`,
    'service.api_key_file',
  );
}
