// POST /v1/runs: a job spec submitted. The body is read here (its size capped, its JSON parsed);
// what the spec means, and whether an Idempotency-Key repeats an earlier submission, is
// ../runs/submission.ts's.
import type { IncomingMessage } from 'node:http';
import type { Clock } from '../../clock.js';
import { SpecError } from '../../errors.js';
import { BodyTooLargeError, isJsonContent, readBody } from '../../http/body.js';
import { jobSpecSchema } from '../../job-spec/schema.js';
import { MAX_SPEC_BYTES } from '../../job-spec/spec-size.js';
import type { Store } from '../../store/index.js';
import { RunSchema } from '../../wire/control-api.js';
import type { Submissions } from '../runs/submission.js';
import { HttpProblem, type ControlRoute } from './route-types.js';
import { toRunView } from './run-view.js';

export interface SubmitRouteDeps {
  store: Store;
  submissions: Pick<Submissions, 'submit'>;
  clock: Pick<Clock, 'now'>;
}

/** The body of a route that takes a job spec (this one, POST /v1/offers): at most MAX_SPEC_BYTES of JSON. */
export async function readJsonSpec(req: IncomingMessage): Promise<unknown> {
  let text: string;
  try {
    text = await readBody(req, MAX_SPEC_BYTES);
  } catch (err) {
    if (err instanceof BodyTooLargeError)
      throw new HttpProblem(413, 'too_large', `The job spec is larger than ${MAX_SPEC_BYTES / 1024} KiB.`);
    throw err;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new SpecError([{ path: '$', message: `not valid JSON: ${(err as Error).message}` }]);
  }
}

export function submitRoute(deps: SubmitRouteDeps): ControlRoute {
  const { store } = deps;
  return {
    method: 'POST',
    path: '/v1/runs',
    doc: {
      summary: 'Submits a job spec',
      headers: [
        { name: 'Idempotency-Key', description: 'a repeat with the same key and spec returns the same run', schema: { type: 'string' } },
      ],
      body: jobSpecSchema,
      responses: {
        201: { description: 'the new run', schema: RunSchema },
        200: { description: 'the run an earlier submission with this Idempotency-Key made', schema: RunSchema },
      },
      errors: [409, 413, 415, 503],
    },
    handle: async ({ req }) => {
      if (!isJsonContent(req))
        throw new HttpProblem(415, 'unsupported_media_type', 'POST /v1/runs takes a JSON job spec with "Content-Type: application/json".');
      const body = await readJsonSpec(req);
      const key = req.headers['idempotency-key'];
      const { row, created } = await deps.submissions.submit(body, typeof key === 'string' && key ? key : undefined);
      return {
        status: created ? 201 : 200,
        body: toRunView(row, store.attempts.forRun(row.id), deps.clock.now(), store.outputs.forRun(row.id)),
      };
    },
  };
}
