// A pass-through in front of the simulator for one daemon (its BERTH_API_URL): every request goes
// on unchanged, and the instances each answer answered for are noted with the time of the answer:
// those it reported (a list page's, or the one instance a show answered), and those a list filtered
// on their ids asked for and answered to its end (what it did not show is not in the filter's
// statuses, or is gone). The cluster bench reads from it when a daemon last looked at an instance:
// the take-over of a run counts as done once its new owner has.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ServiceTap {
  url: string;
  /** Wall ms of the first answer at or after `since` that answered for `instanceId`; undefined if none yet. */
  seenAfter(instanceId: number, since: number): number | undefined;
  close(): Promise<void>;
}

const LISTS = /^\/api\/v[01]\/instances\/(\?|$)/;
const SHOW = /^\/api\/v0\/instances\/(\d+)\/?(\?|$)/;

/** The ids a list's `select_filters` asks for (`id: {in: [...]}` or `{eq: n}`). */
function askedFor(path: string): number[] {
  const raw = new URL(path, 'http://tap').searchParams.get('select_filters');
  if (!raw) return [];
  const id = (JSON.parse(raw) as { id?: { in?: unknown; eq?: unknown } }).id;
  const ids = Array.isArray(id?.in) ? id.in : id?.eq !== undefined ? [id.eq] : [];
  return ids.filter((n): n is number => typeof n === 'number');
}

/** The instance ids an answer to `path` answers for. */
function reported(path: string, body: string): number[] {
  try {
    if (LISTS.test(path)) {
      const parsed = JSON.parse(body) as { instances?: Array<{ id?: unknown }> | null; next_token?: unknown };
      const shown = (parsed.instances ?? []).map((i) => i.id).filter((id): id is number => typeof id === 'number');
      return parsed.next_token == null ? [...shown, ...askedFor(path)] : shown;
    }
    if (SHOW.test(path)) {
      const parsed = JSON.parse(body) as { instances?: { id?: unknown } | null };
      return typeof parsed.instances?.id === 'number' ? [parsed.instances.id] : [];
    }
  } catch {
    // a 5xx page or a cut answer reports nothing
  }
  return [];
}

export async function startServiceTap(target: string): Promise<ServiceTap> {
  const to = new URL(target);
  /** Per instance, the times of the answers that reported it, in order. */
  const seen = new Map<number, number[]>();
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    const watched = req.method === 'GET' && (LISTS.test(path) || SHOW.test(path));
    const upstream = httpRequest(
      { host: to.hostname, port: to.port, method: req.method, path, headers: { ...req.headers, host: to.host } },
      (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (!watched) {
          answer.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => {
          chunks.push(c);
          res.write(c);
        });
        answer.on('end', () => {
          res.end();
          if (answer.statusCode !== 200) return;
          const at = Date.now();
          for (const id of reported(path, Buffer.concat(chunks).toString('utf8'))) {
            const times = seen.get(id);
            if (times) times.push(at);
            else seen.set(id, [at]);
          }
        });
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seenAfter: (id, since) => seen.get(id)?.find((t) => t >= since),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
