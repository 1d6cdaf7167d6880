// One SSH login to an instance, as root, with berth's key, and the commands run over it.
//
// States: connecting → open → closed.
// - connecting: the endpoints are tried in turn, the direct address first (one hop fewer, and it
//   does not depend on the service's proxy), the proxy otherwise. An endpoint that does not answer
//   in time, refuses the connection or closes before the login is `ssh_unreachable`, and the next
//   one is tried. A refused key (`ssh_auth_refused`) or a host key the caller will not accept
//   (`ssh_host_key_changed`) ends the attempt at once: behind both endpoints is the same sshd, and
//   a changed host key is not something to route around. Left by the login (open) or by the last
//   error (nothing opened), or by the caller's signal (`aborted`).
// - open: commands run (`exec`), files read (`sftp`), a shell for a person (`shell`). Keepalives
//   find a dead peer; when the connection ends without `close()`, `closed` resolves with
//   `ssh_dropped` and every command in flight rejects with it. Left by `close()` or the drop.
// - closed: final.
//
// The host key is the caller's to keep: `verifyHostKey(fingerprint, endpoint)` answers whether to
// accept it (at the first login there is no pin yet: accept and pin `session.hostKey`).
import ssh2, { type ClientChannel, type ConnectConfig, type PseudoTtyOptions, type SFTPWrapper } from 'ssh2';
import { BerthError } from '../errors.js';
import { fingerprintOf, type BerthKey } from './key-pair.js';

/** Where an instance's sshd answers: `direct` the host's address and mapped port, `proxy` the service's ssh_host:ssh_port. */
export interface SshEndpoint {
  kind: 'proxy' | 'direct';
  host: string;
  port: number;
}

export interface SshLoginOptions {
  /** The attempt's endpoints (the run view's `instance.ssh`), in any order. */
  endpoints: readonly SshEndpoint[];
  key: Pick<BerthKey, 'privateKey'>;
  /** Whether to log in to a host offering this key (its SHA256 fingerprint). Returning false refuses it. */
  verifyHostKey(fingerprint: string, endpoint: SshEndpoint): boolean;
  /** Time for one endpoint from the TCP connect to the end of the handshake, ms (default 10 000). */
  connectTimeoutMs?: number;
  /** Keepalive spacing, ms (default 15 000); the connection counts as dropped after 3 unanswered. */
  keepaliveIntervalMs?: number;
  signal?: AbortSignal;
}

/** @public (the task follower's) */
export interface ExecOptions {
  signal?: AbortSignal;
  /** The command's standard input; none: it reads end-of-file at once (as `ssh -n`), never waits. */
  stdin?: NodeJS.ReadableStream;
  /** Every chunk of the command's standard output as it comes (also when past the kept bound). */
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
  /** Bytes of each of stdout and stderr kept in the result (default 1 MiB); the rest is counted, not kept. */
  maxOutputBytes?: number;
}

/** @public (the task follower's) */
export interface ExecResult {
  /** The exit code; null when the command was ended by a signal or the server sent none. */
  code: number | null;
  /** The signal that ended the command (`KILL`, `TERM`...), or null. */
  signal: string | null;
  stdout: string;
  stderr: string;
  /** True when stdout or stderr held more than `maxOutputBytes` (the first bytes are kept). */
  truncated: boolean;
}

export interface SshSession {
  /** The endpoint logged in to. */
  readonly endpoint: SshEndpoint;
  /** The host key's SHA256 fingerprint (to pin at a first login). */
  readonly hostKey: string;
  /** Resolves when the session ends: null after `close()`, an `ssh_dropped` error otherwise. Never rejects. */
  readonly closed: Promise<BerthError | null>;
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  /** A login shell, on a pseudo-terminal (`pty`) or without one (`false`, input not a terminal); the caller pipes it. */
  shell(pty: PseudoTtyOptions | false): Promise<ClientChannel>;
  sftp(): Promise<SFTPWrapper>;
  close(): void;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_KEEPALIVE_MS = 15_000;
const KEEPALIVE_COUNT_MAX = 3;
const DEFAULT_MAX_OUTPUT_BYTES = 1 << 20;

/** SSH endpoints in the order to try them: the direct address first, the proxy otherwise. */
function loginOrder(endpoints: readonly SshEndpoint[]): SshEndpoint[] {
  return [...endpoints.filter((e) => e.kind === 'direct'), ...endpoints.filter((e) => e.kind !== 'direct')];
}

/** Logs in to the first endpoint that lets berth in; throws the typed error of the last try otherwise. */
export async function openSshSession(options: SshLoginOptions): Promise<SshSession> {
  const order = loginOrder(options.endpoints);
  if (order.length === 0) throw new BerthError('ssh_unreachable', 'The instance shows no SSH endpoint yet.', { retryable: true });
  let last: BerthError | undefined;
  for (const endpoint of order) {
    if (options.signal?.aborted) throw abortedError(options.signal.reason);
    try {
      return await loginTo(endpoint, options);
    } catch (err) {
      if (!(err instanceof BerthError) || err.code !== 'ssh_unreachable') throw err;
      last = err;
    }
  }
  throw last!;
}

function where(e: SshEndpoint): string {
  return `${e.kind} ${e.host}:${e.port}`;
}

function loginTo(endpoint: SshEndpoint, options: SshLoginOptions): Promise<SshSession> {
  return new Promise<SshSession>((resolve, reject) => {
    const client = new ssh2.Client();
    let hostKey: string | null = null;
    let hostKeyRefused = false;
    let settled = false;
    const fail = (err: BerthError) => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener('abort', onAbort);
      client.removeAllListeners();
      client.on('error', () => {});
      client.destroy();
      reject(err);
    };
    const onAbort = () => fail(abortedError(options.signal?.reason));
    options.signal?.addEventListener('abort', onAbort, { once: true });

    client.once('ready', () => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener('abort', onAbort);
      client.removeAllListeners('error');
      resolve(openSession(client, endpoint, hostKey!));
    });
    client.on('error', (err: Error & { level?: string }) => {
      if (hostKeyRefused) {
        fail(
          new BerthError(
            'ssh_host_key_changed',
            `The SSH host key of ${where(endpoint)} (${hostKey}) is not the one pinned for this instance at its first login: berth does not log in.`,
          ),
        );
      } else if (err.level === 'client-authentication') {
        fail(new BerthError('ssh_auth_refused', `The instance's sshd at ${where(endpoint)} refused berth's SSH key (user root).`));
      } else {
        // client-socket, client-dns, client-timeout, or a peer that hung up during the handshake
        // (a proxy whose instance's sshd is not up yet): not reachable now, maybe later.
        fail(unreachable(endpoint, err.message));
      }
    });
    client.once('close', () => fail(unreachable(endpoint, 'closed before the login')));

    const config: ConnectConfig = {
      host: endpoint.host,
      port: endpoint.port,
      username: 'root',
      privateKey: options.key.privateKey,
      readyTimeout: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      keepaliveInterval: options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_MS,
      keepaliveCountMax: KEEPALIVE_COUNT_MAX,
      hostVerifier: (key: Buffer) => {
        hostKey = fingerprintOf(key);
        const ok = options.verifyHostKey(hostKey, endpoint);
        hostKeyRefused = !ok;
        return ok;
      },
    };
    client.connect(config);
    // Nagle off, as OpenSSH's ssh does for every session (packet.c ssh_packet_set_interactive calls
    // set_nodelay for interactive and bulk sessions alike): an SFTP request or a command's small
    // answer otherwise waits for the peer's delayed ACK (~40 ms a round trip, issue #48). ssh2
    // made the socket in connect(); Node applies the option once it connects.
    client.setNoDelay(true);
  });
}

function abortedError(cause: unknown): BerthError {
  return new BerthError('aborted', 'The SSH call was cancelled.', { cause });
}

function unreachable(endpoint: SshEndpoint, why: string): BerthError {
  return new BerthError('ssh_unreachable', `SSH to ${where(endpoint)} failed: ${why}.`, { retryable: true });
}

function openSession(client: ssh2.Client, endpoint: SshEndpoint, hostKey: string): SshSession {
  let closedByUs = false;
  let ended: BerthError | undefined;
  let resolveClosed!: (e: BerthError | null) => void;
  const closed = new Promise<BerthError | null>((r) => (resolveClosed = r));
  // The calls in flight, each told once when the session ends (a set, not a `closed.then` per call:
  // a follower's session runs many commands over hours).
  const inFlight = new Set<(e: BerthError) => void>();
  const end = (why: string) => {
    if (ended !== undefined) return;
    const drop = new BerthError('ssh_dropped', `The SSH session to ${where(endpoint)} ended: ${why}.`, { retryable: true });
    ended = closedByUs ? new BerthError('ssh_dropped', `The SSH session to ${where(endpoint)} was closed.`) : drop;
    resolveClosed(closedByUs ? null : drop);
    for (const tell of inFlight) tell(ended);
    inFlight.clear();
  };
  client.on('error', (err: Error) => end(err.message));
  client.once('close', () => end('the connection closed'));

  /** Runs `work` until it settles, or rejects with the session's end if that comes first. */
  function untilEnded<T>(work: (resolve: (v: T) => void, reject: (e: unknown) => void) => void): Promise<T> {
    if (ended !== undefined) return Promise.reject(ended);
    return new Promise<T>((resolve, reject) => {
      const tell = (e: BerthError) => reject(e);
      inFlight.add(tell);
      work(
        (v) => {
          inFlight.delete(tell);
          resolve(v);
        },
        (e) => {
          inFlight.delete(tell);
          reject(e);
        },
      );
    });
  }
  function channel<T>(open: (cb: (err: Error | undefined, ch: T) => void) => void): Promise<T> {
    return untilEnded<T>((resolve, reject) =>
      open((err, ch) =>
        err
          ? reject(new BerthError('ssh_dropped', `The SSH server at ${where(endpoint)} refused a channel: ${err.message}.`))
          : resolve(ch),
      ),
    );
  }

  return {
    endpoint,
    hostKey,
    closed,
    async exec(command, opts = {}) {
      if (opts.signal?.aborted) throw abortedError(opts.signal.reason);
      // The channel's listeners go on in ssh2's own callback, not after an await: a short command's
      // exit status (an event, not buffered like its output) can come in the same read as the
      // channel's opening and is emitted before a promise's continuation runs. Seen on a fresh
      // install, where ssh2 runs without its optional native crypto: every exit code was lost.
      return untilEnded<ExecResult>((resolve, reject) =>
        client.exec(command, (err, ch) =>
          err
            ? reject(new BerthError('ssh_dropped', `The SSH server at ${where(endpoint)} refused a channel: ${err.message}.`))
            : runToEnd(ch, opts, resolve, reject),
        ),
      );
    },
    shell(pty) {
      return channel<ClientChannel>((cb) => client.shell(pty, cb));
    },
    sftp() {
      return channel<SFTPWrapper>((cb) => client.sftp(cb));
    },
    close() {
      if (ended === undefined) closedByUs = true;
      client.end();
    },
  };
}

/** Collects a command's output (bounded) until its channel closes; its exit status comes just before. */
function runToEnd(ch: ClientChannel, opts: ExecOptions, resolve: (r: ExecResult) => void, reject: (e: unknown) => void): void {
  const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const out = new Bounded(max);
  const err = new Bounded(max);
  let code: number | null = null;
  let signal: string | null = null;
  const onAbort = () => {
    ch.signal('KILL');
    ch.close();
    reject(abortedError(opts.signal?.reason));
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  if (opts.stdin) opts.stdin.pipe(ch);
  else ch.end();
  ch.on('data', (chunk: Buffer) => {
    out.add(chunk);
    opts.onStdout?.(chunk);
  });
  ch.stderr.on('data', (chunk: Buffer) => {
    err.add(chunk);
    opts.onStderr?.(chunk);
  });
  ch.on('exit', (c: number | null, s?: string) => {
    code = typeof c === 'number' ? c : null;
    signal = s ?? null;
  });
  ch.once('close', () => {
    opts.signal?.removeEventListener('abort', onAbort);
    resolve({ code, signal, stdout: out.text(), stderr: err.text(), truncated: out.over || err.over });
  });
}

/** The first `max` bytes of a stream, and whether there was more. */
class Bounded {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  over = false;
  constructor(private readonly max: number) {}
  add(chunk: Buffer): void {
    const room = this.max - this.size;
    if (chunk.length > room) this.over = true;
    if (room <= 0) return;
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.chunks.push(kept);
    this.size += kept.length;
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}
