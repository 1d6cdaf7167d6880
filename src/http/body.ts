// Reading request bodies and writing answers on node:http, with the limits that keep a bad client
// from hanging or crashing a server (the control API, the readiness-callback and webhook listeners,
// and the simulator).
import type { IncomingMessage, ServerResponse } from 'node:http';

/** A body past the server's limit; the server answers 413 in its own words. */
export class BodyTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`The request body is larger than ${maxBytes} bytes.`);
  }
}

/** The raw body as text; rejects with BodyTooLargeError as soon as it passes `maxBytes`, and when the client goes away. */
export async function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  return (await readRawBody(req, maxBytes)).toString('utf8');
}

/** The raw body's bytes (a signature is checked over them), with the same limit as `readBody`. */
export function readRawBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        reject(new BodyTooLargeError(maxBytes));
        // Read on (and drop) the rest, so the answer can be sent on this connection.
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** True when the request says it has a body. */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** True when the request's Content-Type is application/json (parameters such as charset allowed). */
export function isJsonContent(req: IncomingMessage): boolean {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendText(
  res: ServerResponse,
  status: number,
  text: string | Buffer,
  contentType = 'text/plain; charset=utf-8',
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { ...headers, 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
