// POST /v1/blobs/{sha256}: a content-addressed file a submission then names by its hash (issue #40:
// a task's packed workdir, put by `berth submit` before the spec whose workdir_sha256 names it).
// The body is the raw bytes (application/octet-stream, not JSON: no base64 in a JSON body), at most
// files.workdir_max_mb; the daemon hashes what it received and keeps it only when the hash is the
// one the path names, so a blob in the store is always what its name says. Putting a blob the
// store already has changes nothing (200).
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Clock } from '../../clock.js';
import { BodyTooLargeError, readRawBody } from '../../http/body.js';
import type { Store } from '../../store/index.js';
import { BlobSchema } from '../../wire/control-api.js';
import { HttpProblem, type ControlRoute } from './route-types.js';

export interface BlobRouteDeps {
  store: Pick<Store, 'blobs' | 'transaction'>;
  clock: Pick<Clock, 'now'>;
  /** The largest blob taken, bytes (files.workdir_max_mb). */
  blobMaxBytes: number;
}

/** The one content type a raw body is sent with. */
export const RAW_BODY_TYPE = 'application/octet-stream';

const SHA256 = /^[0-9a-f]{64}$/;

/** In MiB, the unit of files.workdir_max_mb. */
function mb(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

function tooLarge(size: string, maxBytes: number): HttpProblem {
  return new HttpProblem(
    413,
    'too_large',
    `The blob is ${size}; this daemon takes at most ${mb(maxBytes)} (files.workdir_max_mb): leave out what the task need not ship (.berthignore) or raise files.workdir_max_mb.`,
  );
}

async function readBlob(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(mb(declared), maxBytes);
  try {
    return await readRawBody(req, maxBytes);
  } catch (err) {
    if (err instanceof BodyTooLargeError) throw tooLarge(`more than ${mb(maxBytes)}`, maxBytes);
    throw err;
  }
}

export function blobRoute(deps: BlobRouteDeps): ControlRoute {
  return {
    method: 'POST',
    path: '/v1/blobs/{sha256}',
    // The CLI's, with the control token: a dashboard page has no workdir to send.
    auth: 'token',
    rawBody: true,
    doc: {
      summary: "Keeps a file by its sha256 (a task's packed workdir), for a submission to name",
      description: `The body is the file's bytes, with "Content-Type: ${RAW_BODY_TYPE}", at most files.workdir_max_mb; it is kept only when its sha256 is the one the path names.`,
      responses: {
        201: { description: 'kept', schema: BlobSchema },
        200: { description: 'the store already had it', schema: BlobSchema },
      },
      errors: [400, 413, 415, 503],
    },
    handle: async ({ req, params }) => {
      const sha256 = params.sha256!;
      if (!SHA256.test(sha256)) throw new HttpProblem(400, 'bad_request', 'A blob is named by its sha256: 64 lowercase hex digits.');
      const known = deps.store.blobs.size(sha256);
      const data = await readBlob(req, deps.blobMaxBytes);
      const got = createHash('sha256').update(data).digest('hex');
      if (got !== sha256)
        throw new HttpProblem(400, 'bad_request', `The body's sha256 is ${got}, not the ${sha256} the path names: nothing was kept.`);
      if (known !== null) return { status: 200, body: { sha256, size: known } };
      deps.store.transaction(() => deps.store.blobs.put(sha256, data, deps.clock.now()));
      return { status: 201, body: { sha256, size: data.length } };
    },
  };
}
