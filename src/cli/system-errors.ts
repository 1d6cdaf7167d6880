// What the CLI says about an error the operating system gave (a port taken, a file that cannot be
// read): one sentence that says what to fix, and exit 2, since nothing was done. Such an error is
// the user's machine talking, not a bug in berth, whichever command met it (`berth simulate` on a
// taken port used to print "Unexpected error (a bug in berth ...)" and exit 1).

/** A Node system error: it names the call that failed and the errno code. */
export interface SystemError extends Error {
  code: string;
  syscall: string;
  address?: string;
  port?: number;
  path?: string;
}

export function isSystemError(err: unknown): err is SystemError {
  if (!(err instanceof Error)) return false;
  const e = err as Partial<SystemError>;
  return typeof e.code === 'string' && typeof e.syscall === 'string';
}

/** Why each errno code happens, in words, for a listen. */
const LISTEN_WHY: Record<string, string> = {
  EADDRINUSE: 'because another program already listens there; pick another port, or stop that program',
  EACCES: 'because only root may use ports below 1024; pick a port from 1024 up',
  EADDRNOTAVAIL: 'because that address is not one of this machine’s; use 127.0.0.1 or an address it has',
};

/** Why each errno code happens, in words, for a file. */
const FILE_WHY: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  EROFS: 'the file system is read-only',
  ENOSPC: 'the disk is full',
  EMFILE: 'too many open files',
};

/** The sentence for a system error. */
export function systemErrorSentence(err: SystemError): string {
  if (err.syscall === 'listen' || err.syscall === 'bind') {
    const where = err.address !== undefined ? `${err.address}${err.port !== undefined ? `:${err.port}` : ''}` : 'that address';
    return `Cannot listen on ${where} ${LISTEN_WHY[err.code] ?? `(${err.code})`}.`;
  }
  const why = FILE_WHY[err.code] ?? err.code;
  if (err.path !== undefined) return `Cannot ${err.syscall} ${err.path}: ${why} (${err.code}).`;
  return `The system refused a ${err.syscall} call: ${why} (${err.code}).`;
}
