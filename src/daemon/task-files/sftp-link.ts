// One SFTP channel to a task's instance, kept across drops (issue #48): every transfer of a
// collection asks it for the channel; one that fails by the link (src/ssh/sftp-transfer.ts
// isLinkError) says so, and the next ask logs in again, with a short backoff, until the caller's
// signal ends it (the run machine's deadline: files.outputs_timeout_s). Transfers in flight on the
// same channel share one new login. A refused key or a changed host key is not retried: behind
// the next login is the same sshd, nor is a first login that fails (no instance to take from).
//
// States: none (no login yet) → open (a channel) → dropped (being logged in again) → open ... →
// closed (`close()`, or a login refused for good: the error is every later ask's).
import type { SFTPWrapper } from 'ssh2';
import type { Clock } from '../../clock.js';
import { isLinkError } from '../../ssh/sftp-transfer.js';
import type { FileShell } from '../task-end/task-shells.js';

/** The first wait before logging in again, ms, doubled up to RELOGIN_MAX_MS. */
const RELOGIN_FIRST_MS = 250;
const RELOGIN_MAX_MS = 5_000;

/** One login and its channel: `gen` says which, so that two transfers' drops log in once. */
export interface LinkChannel {
  sftp: SFTPWrapper;
  shell: FileShell;
  gen: number;
}

export class SftpLink {
  private current: Promise<LinkChannel> | null = null;
  private gen = 0;
  private failures = 0;
  /** Logins made after the first: what the manifest's detail says of the drops. */
  relogins = 0;

  constructor(
    private readonly open: (signal: AbortSignal) => Promise<FileShell>,
    private readonly clock: Pick<Clock, 'sleep'>,
    private readonly signal: AbortSignal,
  ) {}

  /** The channel now, logging in (again) when there is none. */
  channel(): Promise<LinkChannel> {
    this.current ??= this.login();
    return this.current;
  }

  /** The channel `gen` failed by the link: the next `channel()` logs in again (once for all). */
  dropped(gen: number): void {
    if (gen !== this.gen || this.current === null) return;
    const was = this.current;
    this.current = null;
    void was.then((c) => c.shell.close()).catch(() => undefined);
  }

  close(): void {
    const was = this.current;
    this.current = null;
    void was?.then((c) => c.shell.close()).catch(() => undefined);
  }

  private async login(): Promise<LinkChannel> {
    const gen = ++this.gen;
    if (gen > 1) this.relogins++;
    for (;;) {
      if (this.failures > 0) {
        const wait = Math.min(RELOGIN_FIRST_MS * 2 ** (this.failures - 1), RELOGIN_MAX_MS);
        await this.clock.sleep(wait, this.signal);
      }
      let shell: FileShell | undefined;
      try {
        shell = await this.open(this.signal);
        const sftp = await shell.sftp();
        this.failures = 0;
        return { sftp, shell, gen };
      } catch (err) {
        shell?.close();
        // The first login failing is the collection's answer (no instance to reach); later ones are
        // tried again while the address does not answer, never after a refusal (the key, the host key).
        if (this.signal.aborted || gen === 1 || !isLinkError(err)) throw err;
        this.failures++;
      }
    }
  }
}
