// The CLI's Server-Sent Events reader, as the WHATWG spec reads a stream: any line ending, split
// anywhere across chunks; comments; multi-line data; the last event id kept.
import { describe, expect, it } from 'vitest';
import { SseParser, type SseMessage } from '../../../src/cli/sse.js';

function read(chunks: string[]): { messages: SseMessage[]; comments: string[] } {
  const messages: SseMessage[] = [];
  const comments: string[] = [];
  const p = new SseParser(
    (m) => messages.push(m),
    (c) => comments.push(c),
  );
  for (const c of chunks) p.push(c);
  return { messages, comments };
}

describe('SseParser', () => {
  const stream =
    'retry: 1000\r\n\r\n: heartbeat\n\nid: 7\ndata: {"a":1}\n\nevent: end\ndata: {}\r\rid: 9\ndata: line one\ndata: line two\n\ndata: no end yet';

  it('reads messages, comments and ids whatever the line endings', () => {
    const { messages, comments } = read([stream]);
    expect(comments).toEqual(['heartbeat']);
    expect(messages).toEqual([
      { id: '7', event: 'message', data: '{"a":1}' },
      { id: '7', event: 'end', data: '{}' },
      { id: '9', event: 'message', data: 'line one\nline two' },
    ]);
  });

  it('reads the same when the stream is cut into single characters (a CRLF split between two chunks included)', () => {
    expect(read([...stream])).toEqual(read([stream]));
  });
});
