// The "S3 bucket" of requested logs (logs.yaml: "The logs will be uploaded to S3 and can be
// retrieved from a generated URL"). A request takes a snapshot of the log text at once and gives an
// unguessable URL under `/_logs/` on the simulator itself, fetched without a key like a key-less S3
// object. Its life, in sim seconds from the request:
//   uploading  — until `upload_delay_s`: 403 AccessDenied (S3 XML), as users measured on live
//                instances (a GET before the upload lands is refused, then 200 about a second
//                later: service-facts.md, "Added 2026-11-27"; S3 answers a missing key so when the
//                reader may not list the bucket);
//   available  — the text;
//   expired    — after `url_ttl_s`: 403 AccessDenied "Request has expired", and the text is dropped.
// A host that cannot upload (the instance is offline or unknown) never makes the object appear.
import { randomBytes } from 'node:crypto';
import type { SimClock } from './clock.js';
import { logsConfigSchema, type LogsConfig } from './config.js';

interface Upload {
  text: string;
  availableAt: number;
  expiresAt: number;
}

export interface LogFetch {
  status: number;
  contentType: string;
  body: string;
}

export const LOGS_PATH = '/_logs/';

export class LogUploads {
  private readonly uploads = new Map<string, Upload>();
  private cfg: LogsConfig;

  constructor(
    initial: LogsConfig,
    private readonly clock: SimClock,
  ) {
    this.cfg = { ...initial };
  }

  current(): LogsConfig {
    return { ...this.cfg };
  }

  /** Merges a partial update (validated like the config file's); it applies to later requests. */
  update(partial: { [K in keyof LogsConfig]?: LogsConfig[K] | undefined }): LogsConfig {
    const given = Object.fromEntries(Object.entries(partial).filter(([, v]) => v !== undefined));
    this.cfg = logsConfigSchema.parse({ ...this.cfg, ...given });
    return this.current();
  }

  /** Stores the snapshot and returns the path of its URL; `uploads` false: the object never appears. */
  put(lines: string[], uploads: boolean): string {
    this.purge();
    const now = this.clock.simS();
    const name = `${randomBytes(24).toString('hex')}.log`;
    this.uploads.set(name, {
      text: lines.length === 0 ? '' : `${lines.join('\n')}\n`,
      availableAt: uploads ? now + this.cfg.upload_delay_s : Infinity,
      expiresAt: now + this.cfg.url_ttl_s,
    });
    return `${LOGS_PATH}${name}`;
  }

  get(path: string): LogFetch {
    const name = path.slice(LOGS_PATH.length);
    const up = this.uploads.get(name);
    const now = this.clock.simS();
    if (up && now >= up.expiresAt) return s3Error(403, 'AccessDenied', 'Request has expired', name);
    if (!up || now < up.availableAt) return s3Error(403, 'AccessDenied', 'Access Denied', name);
    return { status: 200, contentType: 'text/plain; charset=utf-8', body: up.text };
  }

  /** Drops texts long expired (their names answer 403 afterwards, like any key not written). */
  private purge(): void {
    const now = this.clock.simS();
    for (const [name, up] of this.uploads) if (now >= up.expiresAt + this.cfg.url_ttl_s) this.uploads.delete(name);
  }
}

function s3Error(status: number, code: string, message: string, key: string): LogFetch {
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><Key>instance_logs/${key}</Key></Error>`;
  return { status, contentType: 'application/xml', body };
}
