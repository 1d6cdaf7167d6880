// A Server-Sent Events reader (the WHATWG "event stream interpretation"), for the CLI and tests of
// GET /v1/events/stream: lines end with LF, CR or CRLF (also split across chunks), `field: value`
// with one optional space, `:` comments (heartbeats), and a blank line dispatches the message.
// Kept here without a dependency: the CLI must start in a few tens of ms.

export interface SseMessage {
  /** The `id:` of the message, or of an earlier one (as the last-event-ID buffer keeps it). */
  id: string | undefined;
  /** `message` unless an `event:` line named another. */
  event: string;
  data: string;
}

export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private lastId: string | undefined;

  constructor(
    private readonly onMessage: (m: SseMessage) => void,
    private readonly onComment?: (text: string) => void,
  ) {}

  push(chunk: string): void {
    this.buffer += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      if (!m) return;
      // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
      if (m[0] === '\r' && m.index === this.buffer.length - 1) return;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return this.onComment?.(line.slice(1).trimStart());
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.lastId = value;
  }

  private dispatch(): void {
    const data = this.data;
    const event = this.event || 'message';
    this.data = [];
    this.event = '';
    if (data.length === 0) return;
    this.onMessage({ id: this.lastId, event, data: data.join('\n') });
  }
}
