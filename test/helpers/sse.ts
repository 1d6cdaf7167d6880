// Reads GET /v1/events/stream over node:http for tests: every message and comment as it arrives,
// until the test closes it or the server ends it.
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { SseParser, type SseMessage } from '../../src/cli/sse.js';

export interface SseClient {
  status: number;
  headers: IncomingMessage['headers'];
  messages: SseMessage[];
  comments: string[];
  /** Resolves when the server ended the stream (cleanly: true; cut: false). */
  ended: Promise<boolean>;
  /** Resolves once `pred` holds for the messages received (checked on each arrival). */
  until(pred: (messages: SseMessage[]) => boolean, timeoutMs?: number): Promise<SseMessage[]>;
  close(): void;
}

export function openSse(url: string, headers: Record<string, string>): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    let req: ClientRequest | undefined = undefined;
    const waiters: Array<() => void> = [];
    const messages: SseMessage[] = [];
    const comments: string[] = [];
    const parser = new SseParser(
      (m) => {
        messages.push(m);
        waiters.forEach((w) => w());
      },
      (c) => {
        comments.push(c);
        waiters.forEach((w) => w());
      },
    );
    req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
      res.setEncoding('utf8');
      let settle!: (clean: boolean) => void;
      const ended = new Promise<boolean>((r) => (settle = r));
      res.on('data', (c: string) => parser.push(c));
      res.on('end', () => settle(true));
      res.on('error', () => settle(false));
      res.on('aborted', () => settle(false));
      res.on('close', () => {
        settle(res.complete);
        waiters.forEach((w) => w());
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        messages,
        comments,
        ended,
        until(pred, timeoutMs = 15_000) {
          return new Promise((ok, fail) => {
            const check = () => {
              if (pred(messages)) {
                clearTimeout(timer);
                waiters.splice(waiters.indexOf(check), 1);
                ok(messages);
              } else if (res.destroyed || res.complete) {
                clearTimeout(timer);
                waiters.splice(waiters.indexOf(check), 1);
                fail(new Error(`the stream ended before the condition held; got ${messages.length} messages`));
              }
            };
            const timer = setTimeout(() => {
              waiters.splice(waiters.indexOf(check), 1);
              fail(new Error(`the condition did not hold within ${timeoutMs} ms; got ${messages.length} messages`));
            }, timeoutMs);
            waiters.push(check);
            check();
          });
        },
        close: () => req?.destroy(),
      });
    });
    req.on('error', reject);
    req.end();
  });
}
