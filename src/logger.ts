// The one pino logger. Secrets are redacted by path; pino's wildcards reach one level only, so the
// paths below name every place berth could put a secret in a log object. Message strings are never
// scanned: callers must not interpolate secrets into them.
import pino, { type Logger, type DestinationStream } from 'pino';

export type { Logger };

const SECRET_KEYS = [
  'apiKey',
  'api_key',
  'authorization',
  'Authorization',
  'instance_api_key',
  'instanceApiKey',
  'webhook_secret',
  'webhookSecret',
  'controlToken',
  'token',
  'env',
  'extra_env',
  'secret',
  'secrets',
  'value',
  // berth's SSH private key (src/ssh/key-pair.ts: BerthKey.privateKey)
  'privateKey',
  'private_key',
];

const REDACT_PATHS = [
  ...SECRET_KEYS,
  ...SECRET_KEYS.map((k) => `*.${k}`),
  ...SECRET_KEYS.map((k) => `*.*.${k}`),
  'headers.authorization',
  'req.headers.authorization',
  'spec.env',
  'run.spec.env',
  // store.url may carry a Postgres password
  'store.url',
  'config.store.url',
];

export interface LoggerOptions {
  level?: string;
  /** Human-readable output (pino-pretty) instead of JSON lines. */
  pretty?: boolean | undefined;
  /** Where lines go; default stdout. Tests pass a capturing stream. */
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const base = {
    level: options.level ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
  };
  if (options.destination) return pino(base, options.destination);
  if (options.pretty) {
    return pino({ ...base, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss' } } });
  }
  return pino(base, pino.destination({ sync: true }));
}

/** A logger that drops everything (library use, unit tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
