// Readiness by SSH: an instance is ready when a TCP connection to an endpoint berth will print
// reads an SSH identification line (RFC 4253 §4.2: "SSH-2.0-..." or, for old servers that also
// speak 2.0, "SSH-1.99-..."). `actual_status: running` only says the container started; users of
// peer tools report "running" instances whose SSH times out for minutes or forever.
//
// One probe loop per instance, one connection in flight at a time: the endpoints are tried in turn,
// each try bounded by a connect and a banner timeout, and rounds are paced with a growing pause so
// that a slow host is not hammered. Once one endpoint answers, the others get one try each, so that
// the user is shown every endpoint that works. The loop ends only when something answers or the
// caller aborts (the run machine bounds it with readiness.ssh_timeout_s).
import { connect } from 'node:net';
import type { Endpoint } from '../../../machines/run-types.js';
import type { Clock } from '../../clock.js';

export interface SshProbeTimings {
  /** TCP connect timeout of one try, ms. */
  connectTimeoutMs: number;
  /** Wait for the banner line after connecting, ms. */
  bannerTimeoutMs: number;
  /** Pause after the first unanswered round, ms; it grows by half each round. */
  firstPauseMs: number;
  /** Longest pause between rounds, ms. */
  maxPauseMs: number;
}

const DEFAULT_SSH_PROBE_TIMINGS: SshProbeTimings = {
  connectTimeoutMs: 5_000,
  bannerTimeoutMs: 5_000,
  firstPauseMs: 1_000,
  maxPauseMs: 10_000,
};

/** The identification line must come within the first 255 bytes (RFC 4253 allows other lines first). */
const MAX_BANNER_BYTES = 4_096;
const BANNER = /^SSH-(2\.0|1\.99)-/m;

/** One try: true when the endpoint sends an SSH identification line in time. Never throws. */
export function answersSsh(
  endpoint: Endpoint,
  timings: Pick<SshProbeTimings, 'connectTimeoutMs' | 'bannerTimeoutMs'>,
  signal?: AbortSignal,
): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    if (signal?.aborted) return resolve(false);
    let received = '';
    let settled = false;
    const socket = connect({ host: endpoint.host, port: endpoint.port });
    const finish = (ok: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(ok);
    };
    const onAbort = () => finish(false);
    signal?.addEventListener('abort', onAbort, { once: true });
    let timer = setTimeout(() => finish(false), timings.connectTimeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(false), timings.bannerTimeoutMs);
    });
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (BANNER.test(received)) finish(true);
      else if (received.length > MAX_BANNER_BYTES) finish(false);
    });
    socket.once('error', () => finish(false));
    socket.once('close', () => finish(BANNER.test(received)));
  });
}

/** One try of each endpoint, in turn (no pause, no second round): every endpoint that answered. */
export async function probeOnce(
  endpoints: Endpoint[],
  signal: AbortSignal,
  tryEndpoint: (e: Endpoint, s: AbortSignal) => Promise<boolean> = (e, s) => answersSsh(e, DEFAULT_SSH_PROBE_TIMINGS, s),
): Promise<Endpoint[]> {
  const answered: Endpoint[] = [];
  for (const endpoint of endpoints) if (!signal.aborted && (await tryEndpoint(endpoint, signal))) answered.push(endpoint);
  return answered;
}

/**
 * Probes until an endpoint answers; resolves with every endpoint that did (the first one found and
 * any other that answers one more try). Rejects only when `signal` aborts.
 */
export async function probeUntilReachable(
  endpoints: Endpoint[],
  clock: Clock,
  signal: AbortSignal,
  timings: SshProbeTimings = DEFAULT_SSH_PROBE_TIMINGS,
  tryEndpoint: (e: Endpoint, s: AbortSignal) => Promise<boolean> = (e, s) => answersSsh(e, timings, s),
): Promise<Endpoint[]> {
  let pause = timings.firstPauseMs;
  for (;;) {
    for (const [i, endpoint] of endpoints.entries()) {
      if (signal.aborted) break;
      if (!(await tryEndpoint(endpoint, signal))) continue;
      const others = endpoints.filter((_, j) => j !== i);
      const alsoAnswer: Endpoint[] = [];
      for (const other of others) if (await tryEndpoint(other, signal)) alsoAnswer.push(other);
      return endpoints.filter((e) => e === endpoint || alsoAnswer.includes(e));
    }
    // No endpoint yet (the record may not show one before `ports` appears): wait, then try again.
    await clock.sleep(pause, signal);
    pause = Math.min(timings.maxPauseMs, Math.round(pause * 1.5));
  }
}
