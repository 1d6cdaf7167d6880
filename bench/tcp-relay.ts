// A TCP relay on 127.0.0.1 in front of a server (issue #48): each connection it accepts is carried
// to the target, every chunk held `delayMs` in each direction (a 2×delay round trip, the bandwidth
// left whole: chunks leave in order, each at its arrival time plus the delay), and every
// connection can be cut at once, as a dropped network would. The files bench measures berth and
// OpenSSH through it; the transfer tests cut it mid-download.
import { createServer, Socket, type AddressInfo } from 'node:net';

export interface TcpRelay {
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Bytes carried from the clients to the server so far. */
  readonly upBytes: number;
  /** Ends every connection now (both sides reset). */
  cutAll(): void;
  /** Ends every connection once `bytes` more have come from the clients (once). */
  cutAfter(bytes: number): void;
  close(): Promise<void>;
}

export async function startTcpRelay(target: { host: string; port: number }, opts: { delayMs?: number } = {}): Promise<TcpRelay> {
  const delayMs = opts.delayMs ?? 0;
  const pairs = new Set<[Socket, Socket]>();
  let accepted = 0;
  const up = { bytes: 0, cutAt: Infinity };
  const cutAll = () => {
    for (const [a, b] of pairs) {
      a.resetAndDestroy();
      b.resetAndDestroy();
    }
    pairs.clear();
  };
  const server = createServer((client) => {
    accepted++;
    const upstream = new Socket();
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of pair) {
      s.setNoDelay(true);
      s.on('error', end);
      s.on('close', end);
    }
    client.on('data', (chunk: Buffer) => {
      up.bytes += chunk.length;
      if (up.bytes >= up.cutAt) {
        up.cutAt = Infinity;
        cutAll();
      }
    });
    carry(client, upstream, delayMs);
    carry(upstream, client, delayMs);
    upstream.connect(target.port, target.host);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get accepted() {
      return accepted;
    },
    get upBytes() {
      return up.bytes;
    },
    cutAll,
    cutAfter(bytes) {
      up.cutAt = up.bytes + bytes;
    },
    async close() {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `from`'s bytes to `to`, each chunk `delayMs` late; reading pauses while `to` is full (TCP's own back-pressure). */
function carry(from: Socket, to: Socket, delayMs: number): void {
  if (delayMs === 0) {
    from.pipe(to);
    return;
  }
  const queue: Array<{ at: number; chunk: Buffer }> = [];
  let timer: NodeJS.Timeout | null = null;
  const flush = () => {
    timer = null;
    const now = performance.now();
    while (queue.length > 0 && queue[0]!.at <= now) {
      if (to.destroyed) return;
      if (!to.write(queue.shift()!.chunk)) {
        from.pause();
        to.once('drain', () => from.resume());
      }
    }
    if (queue.length > 0) timer = setTimeout(flush, Math.max(0, queue[0]!.at - now));
  };
  from.on('data', (chunk: Buffer) => {
    queue.push({ at: performance.now() + delayMs, chunk });
    timer ??= setTimeout(flush, delayMs);
  });
  from.on('end', () => {
    const wait = queue.length > 0 ? Math.max(0, queue[queue.length - 1]!.at - performance.now()) : 0;
    setTimeout(() => to.end(), wait + 1);
  });
}
