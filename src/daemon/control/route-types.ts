// The shape of a control API route and of what it answers, and the readings of a request every
// route table shares (./control-routes.ts and the tables it puts together), the OpenAPI document
// (./control-openapi.ts) and the server (./control-api.ts). It imports none of them, so none of them
// import each other in a circle.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import type { RunRow, Store } from '../../store/index.js';
import type { ErrorKind } from '../../wire/control-api.js';
import type { SignIn } from './dashboard/sessions.js';

/** An answer other than 2xx, in the envelope's words. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly kind: ErrorKind,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/**
 * The one reading of a whole number from a request (a query parameter, Last-Event-ID): absent or
 * empty gives undefined; anything else must be a whole number ≥ 0, or the request is refused (400).
 */
export function wholeNumber(raw: string | null | undefined, name: string): number | undefined {
  if (raw === null || raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new HttpProblem(400, 'bad_request', `${name} must be a whole number ≥ 0, got "${raw.slice(0, 40)}".`);
  return n;
}

/**
 * The run a `/v1/runs/{id}` route names, or a 404: its id, or the name of a live run (issue #41:
 * people name runs by their names; new live runs get unique names, ../runs/submission.ts). An id
 * wins over a name; a name that two live runs share (runs stored before names were made unique) is
 * a 409 listing their ids.
 */
export function runOf(store: Pick<Store, 'runs'>, r: Pick<Request, 'params'>): RunRow {
  const key = r.params.id!;
  const row = store.runs.get(key);
  if (row) return row;
  const named = store.runs.live().filter((run) => run.name === key);
  if (named.length === 1) return named[0]!;
  if (named.length > 1)
    throw new HttpProblem(
      409,
      'ambiguous_name',
      `${named.length} live runs are named "${key}": name one by its id (${named.map((n) => n.id).join(', ')}).`,
      { run_ids: named.map((n) => n.id) },
    );
  throw new HttpProblem(404, 'not_found', `No run ${key}.`);
}

export interface Request {
  req: IncomingMessage;
  /** For a route that writes its answer itself (a stream); the others return an Answer. */
  res: ServerResponse;
  url: URL;
  /** The Host it was sent to (one of the daemon's own). */
  host: string;
  params: Record<string, string>;
  /** The dashboard session the request came with, when it came with one and not the token. */
  session?: SignIn;
}

export type Answer =
  /** JSON. */
  | { status: number; body: unknown; headers?: Record<string, string> }
  /** Text of another type (the Prometheus exposition, the dashboard's page and assets). */
  | { status: number; text: string | Buffer; contentType: string; headers?: Record<string, string> }
  /** The route wrote the answer itself (Server-Sent Events). */
  | { streamed: true };

/**
 * What GET /v1/openapi.json says of a route (./control-openapi.ts): the schemas are the zod schemas
 * of src/wire/control-api.ts the daemon answers with, named in the document's components.
 */
interface RouteDoc {
  summary: string;
  description?: string;
  query?: Array<{ name: string; description: string; schema: Record<string, unknown> }>;
  headers?: Array<{ name: string; description: string; schema: Record<string, unknown> }>;
  /** A JSON request body. */
  body?: z.ZodType;
  /** The body may be left out (POST /v1/runs/{id}/cancel). */
  bodyOptional?: true;
  /** Answers other than errors: a JSON schema, or another content type described in words. */
  /** `contentType` may list several, comma-separated (the dashboard's assets). */
  responses: Record<number, { description: string; schema?: z.ZodType; contentType?: string; itemSchema?: z.ZodType }>;
  /** Error statuses this route answers besides those of every route (all in the error envelope). */
  errors?: number[];
}

export interface ControlRoute {
  method: 'GET' | 'POST';
  path: string;
  /**
   * 'open': answered without the token (health, the proof a client checks before sending it, the
   * dashboard's page). 'token': the control token only, never a dashboard session (making sign-in
   * codes, rotating the token). Otherwise: the token or a dashboard session (./control-api.ts).
   */
  auth?: 'open' | 'token';
  /** Its body is raw bytes (application/octet-stream) the route reads itself, not JSON. */
  rawBody?: boolean;
  doc: RouteDoc;
  handle(r: Request): Answer | Promise<Answer>;
}
