// A loopback port nothing listens on right now (bound to port 0, then let go), for settings that
// must name their port before the server starts (readiness.callback_listen and its callback_url).
// The readiness bench and its integration test both use it.
import { createServer } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
