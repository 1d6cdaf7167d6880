// Files over SFTP at the link's speed (issue #48): many requests in flight, as OpenSSH's sftp keeps
// them (sftp-client.c: DEFAULT_COPY_BUFLEN 32768, DEFAULT_NUM_REQUESTS 64; `sftp -B`/`-R`), instead
// of one READ or WRITE waiting for the last (ssh2's `createReadStream` and `writeFile` do that: at a
// 100 ms round trip, 32 KiB a round trip is 0.3 MB/s). Both ways start at a byte offset, so that a
// transfer cut by a drop goes on from what already arrived once the caller has logged in again.
//
// A read may come back short (a server's bound, or the file's end): the rest is asked for again;
// the bytes are handed over in order whatever order the answers come in. A write is never split
// by ssh2 into requests that wait for each other: chunks stay within ssh2's bound for the server.
// Errors keep their SFTP status `code` (a number: the server's answer, e.g. 2 "no such file") or
// their system code (the local disk); ssh2's own (the channel or the connection gone, no answer)
// become `ssh_dropped`, retryable: `isLinkError` tells them apart. Nothing here logs, retries or logs in: the callers decide.
import type { SFTPWrapper } from 'ssh2';
import { BerthError } from '../errors.js';

/** Bytes one request asks for at most (OpenSSH's sftp default buffer). */
const CHUNK = 32 * 1024;
/** Requests in flight at most, per file (OpenSSH's sftp default). */
const IN_FLIGHT = 64;
/**
 * Requests asked for together at least, once the first are out, in one write to the socket: each
 * READ is its own SSH packet, and ssh2 writes every packet to the socket by itself (a syscall and
 * a cipher set up for ~60 bytes). One at a time, as each answer came, the requests were a third of
 * a 100 MB download's CPU at 0 ms (a `--cpu-prof` of the files bench: SFTP.js read_ → sendPacket).
 */
const ASK_BATCH = 8;

/** ssh2's bound on one request's data to a server that is not OpenSSH (its SFTP.js: 34000 less its 2 KiB overhead). */
const SSH2_NON_OPENSSH_MAX = 34_000 - 2 * 1024;

/**
 * The SFTP channel's receive window kept open ahead of the reads (bytes), and the least worth a
 * WINDOW_ADJUST. ssh2 opens its channels with 2 MiB and tops the window up only once it has
 * fallen to half (node_modules/ssh2/lib/Channel.js MAX_WINDOW, WINDOW_THRESHOLD; client.js
 * CHANNEL_DATA): up to 1 MiB received is not yet given back, so at a 100 ms round trip a download
 * ran at ~10 MB/s however many reads were in flight. OpenSSH's client gives the window back once
 * three packets are consumed (channels.c channel_check_window: `local_maxpacket*3`), so the
 * window is nearly whole all the time. Here it is topped up to 4 MiB once 1 MiB of it is used: at
 * least 3 MiB stay open, above the 2 MiB the reads in flight ask for, so the window is never the
 * bound; and an adjust is a packet of its own (a syscall, a cipher): one every 3 answers, as
 * OpenSSH's, was a tenth of a download's CPU at 0 ms here.
 */
const WINDOW = 4 * 1024 * 1024;
const WINDOW_STEP = 1024 * 1024;

/**
 * Gives the server back the window the answers used, as OpenSSH does. ssh2's channel fields are
 * private (its SFTP object is the channel: `incoming.window`, `outgoing.id`, `_protocol`); when
 * they are not there (another ssh2), nothing is done and ssh2's own adjust goes on as before.
 * ssh2's own adjust never fires once this keeps the window above its half-way mark.
 */
function keepWindowOpen(sftp: SFTPWrapper): void {
  const ch = sftp as unknown as {
    incoming?: { window?: unknown };
    outgoing?: { id?: unknown; state?: unknown };
    _protocol?: { channelWindowAdjust?: (id: number, amount: number) => void };
  };
  const win = ch.incoming?.window;
  const id = ch.outgoing?.id;
  const adjust = ch._protocol?.channelWindowAdjust;
  if (typeof win !== 'number' || typeof id !== 'number' || typeof adjust !== 'function' || ch.outgoing?.state !== 'open') return;
  const amount = WINDOW - win;
  if (amount < WINDOW_STEP) return;
  ch.incoming!.window = win + amount;
  adjust.call(ch._protocol, id, amount);
}

/** The bytes of one request: 32 KiB, or less where ssh2 would split it for this server. */
function chunkOf(sftp: SFTPWrapper): number {
  // ssh2 keeps its per-server bound in private fields (256 KiB to OpenSSH, 31 KiB to others);
  // asking for more makes it send the rest only once the first part came back.
  const own = sftp as unknown as { _maxReadLen?: unknown; _maxWriteLen?: unknown };
  const bounds = [own._maxReadLen, own._maxWriteLen].filter((n): n is number => typeof n === 'number' && n > 0);
  return Math.min(CHUNK, ...(bounds.length > 0 ? bounds : [SSH2_NON_OPENSSH_MAX]));
}

/**
 * Whether an SFTP failure is the link's (the session or channel gone, no answer): ssh2's own
 * errors carry no `code`; the server's answers carry their SFTP status (a number), and a local
 * failure (the disk) its system code (a string).
 */
export function isLinkError(err: unknown): boolean {
  if (err instanceof BerthError) return (err.code === 'ssh_dropped' || err.code === 'ssh_unreachable') && err.retryable;
  return err instanceof Error && (err as { code?: unknown }).code === undefined;
}

function linkError(err: unknown): unknown {
  if (!isLinkError(err) || err instanceof BerthError) return err;
  return new BerthError('ssh_dropped', `An SFTP call got no answer: ${(err as Error).message}.`, { retryable: true, cause: err });
}

/** Per SFTP channel, one pair of listeners for every call bound to it: its end, told to each. */
const ends = new WeakMap<SFTPWrapper, { gone: BerthError | null; tell: Set<(e: BerthError) => void> }>();

function endOf(sftp: SFTPWrapper): { gone: BerthError | null; tell: Set<(e: BerthError) => void> } {
  let end = ends.get(sftp);
  if (end) return end;
  const made = { gone: null as BerthError | null, tell: new Set<(e: BerthError) => void>() };
  const over = (err?: unknown) => {
    if (made.gone) return;
    // An answer ssh2 cannot read (one packet past its 256 KiB bound) would come again after a new
    // login: the server's fault, not the link's, so not retried.
    const unreadable = (err as { level?: unknown } | undefined)?.level === 'sftp-protocol';
    made.gone = unreadable
      ? new BerthError('ssh_dropped', `The SFTP server sent an answer berth cannot read: ${(err as Error).message}.`, { cause: err })
      : new BerthError('ssh_dropped', 'The SFTP channel closed.', { retryable: true, ...(err ? { cause: err } : {}) });
    for (const t of made.tell) t(made.gone);
    made.tell.clear();
  };
  sftp.once('close', () => over());
  sftp.on('error', over);
  ends.set(sftp, made);
  end = made;
  return end;
}

/**
 * Runs `work` until it settles, or rejects when the signal aborts or the SFTP channel closes or
 * fails first (ssh2 may then never call back).
 */
function sftpBound<T>(
  sftp: SFTPWrapper,
  signal: AbortSignal,
  work: (resolve: (v: T) => void, reject: (e: unknown) => void, over: () => boolean) => void,
): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  const end = endOf(sftp);
  if (end.gone) return Promise.reject(end.gone);
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      end.tell.delete(onEnd);
      return true;
    };
    const onAbort = () => settle() && reject(signal.reason);
    const onEnd = (e: BerthError) => settle() && reject(e);
    signal.addEventListener('abort', onAbort, { once: true });
    end.tell.add(onEnd);
    try {
      work(
        (v) => settle() && resolve(v),
        (e) => settle() && reject(linkError(e)),
        () => settled,
      );
    } catch (e) {
      if (settle()) reject(linkError(e));
    }
  });
}

/** One SFTP call with a callback, bound as `sftpBound` says. */
export function sftpCall<T = void>(
  sftp: SFTPWrapper,
  signal: AbortSignal,
  run: (cb: (err: Error | null | undefined, v: T) => void) => void,
): Promise<T> {
  return sftpBound<T>(sftp, signal, (resolve, reject) => run((err, v) => (err ? reject(err) : resolve(v))));
}

/**
 * Runs `send` with the login's socket corked, so that the packets it writes leave in one write.
 * ssh2 keeps the socket private (`_client._sock` of its SFTP object); without it, `send` just runs.
 */
function corked(sftp: SFTPWrapper, send: () => void): void {
  const sock = (sftp as unknown as { _client?: { _sock?: { cork?: () => void; uncork?: () => void } } })._client?._sock;
  if (typeof sock?.cork !== 'function' || typeof sock.uncork !== 'function') return send();
  sock.cork();
  try {
    send();
  } finally {
    sock.uncork();
  }
}

/** A handle closed without waiting: its answer changes nothing, and on a dead link it never comes. */
function closeQuietly(sftp: SFTPWrapper, handle: Buffer): void {
  try {
    sftp.close(handle, () => undefined);
  } catch {
    // the channel is gone: so is the handle
  }
}

/**
 * Reads `path` from byte `from` up to byte `to` (exclusive), many requests in flight; `take` gets
 * every byte once, in order. Resolves with the offset reached: `to`, or less where the file ended.
 */
export async function readFileRange(
  sftp: SFTPWrapper,
  path: string,
  range: { from: number; to: number },
  take: (chunk: Buffer) => void,
  signal: AbortSignal,
): Promise<number> {
  if (range.to <= range.from) return range.from;
  const handle = await sftpCall<Buffer>(sftp, signal, (cb) => sftp.open(path, 'r', cb));
  const chunk = chunkOf(sftp);
  keepWindowOpen(sftp);
  try {
    return await sftpBound<number>(sftp, signal, (resolve, reject, over) => {
      let end = range.to; // lowered once a read meets the file's end
      let next = range.from; // the next byte to ask for
      let done = range.from; // every byte before it handed over
      const arrived = new Map<number, Buffer>(); // answers ahead of `done`, by offset
      const gaps: Array<[number, number]> = []; // parts a short read left: asked for first
      let inFlight = 0;
      let failed = false;
      const ask = () => {
        // While answers are still to come, wait for a batch's worth of free slots (see ASK_BATCH).
        if (inFlight > 0 && IN_FLIGHT - inFlight < ASK_BATCH) return;
        corked(sftp, () => askNow());
      };
      const askNow = () => {
        while (!failed && inFlight < IN_FLIGHT) {
          let at: number;
          let len: number;
          const gap = gaps.shift();
          if (gap) [at, len] = gap;
          else if (next < end) {
            at = next;
            len = Math.min(chunk, end - next);
            next += len;
          } else break;
          if (at >= end) continue;
          inFlight++;
          sftp.read(handle, Buffer.allocUnsafe(len), 0, len, at, (err, n, buf) => {
            inFlight--;
            keepWindowOpen(sftp);
            // Answers after an abort or the channel's end are dropped: the caller has moved on.
            if (failed || over()) return;
            if (err) {
              failed = true;
              return reject(err);
            }
            try {
              landed(at, len, n, buf);
            } catch (e) {
              failed = true; // the local side failed (a full disk): not the link's
              return reject(e);
            }
            if (done >= end && inFlight === 0) return resolve(done);
            ask();
            if (inFlight === 0) resolve(done); // the file ended before `to`, nothing left to ask
          });
        }
      };
      const landed = (at: number, len: number, n: number, buf: Buffer) => {
        if (n === 0)
          end = Math.min(end, at); // the file ends here (EOF)
        else {
          arrived.set(at, buf.subarray(0, n));
          if (n < len && at + n < end) gaps.push([at + n, len - n]);
        }
        for (let b = arrived.get(done); b !== undefined; b = arrived.get(done)) {
          arrived.delete(done);
          const kept = done + b.length > end ? b.subarray(0, end - done) : b;
          if (kept.length > 0) take(kept);
          done += kept.length;
        }
      };
      ask();
    });
  } finally {
    closeQuietly(sftp, handle);
  }
}

/**
 * Writes `data` from byte `from` on into `path` (made when missing, never cut shorter here), many
 * requests in flight; resolves once the server has answered every write and the handle is closed.
 */
export async function writeFileFrom(
  sftp: SFTPWrapper,
  path: string,
  data: Buffer,
  opts: { from: number; mode?: number; truncate?: boolean },
  signal: AbortSignal,
): Promise<void> {
  // 'w' truncates (a fresh file); 'r+' keeps what a cut transfer left; SFTP v3 has no "create, keep".
  const flags = opts.truncate ? 'w' : 'r+';
  const handle = await sftpCall<Buffer>(sftp, signal, (cb) =>
    opts.mode === undefined ? sftp.open(path, flags, cb) : sftp.open(path, flags, { mode: opts.mode }, cb),
  );
  const chunk = chunkOf(sftp);
  let closed = false;
  try {
    await sftpBound<void>(sftp, signal, (resolve, reject, over) => {
      let next = Math.min(opts.from, data.length);
      let inFlight = 0;
      let failed = false;
      const send = () => {
        while (!failed && inFlight < IN_FLIGHT && next < data.length) {
          const at = next;
          const len = Math.min(chunk, data.length - at);
          next += len;
          inFlight++;
          sftp.write(handle, data, at, len, at, (err) => {
            inFlight--;
            if (failed || over()) return;
            if (err) {
              failed = true;
              return reject(err);
            }
            if (next >= data.length && inFlight === 0) return resolve();
            send();
          });
        }
      };
      if (next >= data.length) return resolve();
      send();
    });
    // The close's answer says the server has the bytes (OpenSSH closes the file then).
    closed = true;
    await sftpCall(sftp, signal, (cb) => sftp.close(handle, cb));
  } finally {
    if (!closed) closeQuietly(sftp, handle);
  }
}
