// The simulator's reading of request bodies: at most 1 MB (413 past it, in the service's words),
// and JSON whatever the Content-Type says. The reading itself is the shared src/http/body.ts.
import type { IncomingMessage } from 'node:http';
import { BodyTooLargeError, readBody } from '../http/body.js';
import { invalidRequest, payloadTooLarge } from './sim-error.js';

const MAX_BODY_BYTES = 1 << 20;

/** The raw body as text; 413 past 1 MB; rejects when the client goes away. */
export async function readSimBody(req: IncomingMessage): Promise<string> {
  try {
    return await readBody(req, MAX_BODY_BYTES);
  } catch (err) {
    throw err instanceof BodyTooLargeError ? payloadTooLarge() : err;
  }
}

/**
 * JSON regardless of the Content-Type header: curl -d sends form encoding and the service reads
 * JSON anyway. An empty body is `undefined`.
 */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw invalidRequest('Request body is not valid JSON.');
  }
}
