// The sshd of one instance's container while it runs: a real SSH server (the `ssh2` package's
// Server, fed the sockets its listeners accept, ssh-listeners.ts) with the instance's host key.
//
// Login: user `root`, public keys only, the keys the instance authorizes (ssh-keys.ts). Sessions:
//   exec    — `/bin/sh -c COMMAND` as a real process in the instance's directory with the
//             environment its onstart gets (onstart-runner.ts `container`), plus the session's
//             `env` requests; stdout and stderr streamed, the exit status (or signal) sent; the
//             process group is killed when the channel closes;
//   shell   — an interactive `sh -i` the same way (a `pty` request is accepted, but no terminal is
//             made: the shell reads and writes pipes);
//   sftp    — ssh-sftp.ts, on the instance's directory.
// A connection that has not logged in after `hold_ms` is closed (sshd's LoginGraceTime).
//
// sshd's lines for a connection (OpenSSH 8.9's words) go to the container log as they happen, each
// at its moment (as sshd's syslog writes them), so that a live log only grows at its end:
//   no identification from the client (a banner probe):
//       error: kex_exchange_identification: Connection closed by remote host
//       Connection closed by 127.0.0.1 port N
//   a key refused:       Failed publickey for root from 127.0.0.1 port N ssh2: ED25519 SHA256:...
//   a key accepted:      Accepted publickey for root from 127.0.0.1 port N ssh2: ED25519 SHA256:...
//   closed before login: Connection closed by authenticating user root 127.0.0.1 port N [preauth]
//   the client's end:    Received disconnect from 127.0.0.1 port N:11: disconnected by user
//                        Disconnected from user root 127.0.0.1 port N
//   cut otherwise:       Connection reset by 127.0.0.1 port N
// (auth.c `auth_log` "%s %s%s%s for %s%.100s from %.200s port %d ssh2%s%s"; packet.c
// `sshpkt_fmt_connection_id`; serverloop.c; "Failed" is logged at INFO from max_authtries/2
// failures, at VERBOSE before: the simulator logs every one.)
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import ssh2, { type AuthContext, type Connection, type ServerChannel, type Session } from 'ssh2';
import { runAs } from './onstart-runner.js';
import { serveSftp } from './ssh-sftp.js';
import { fingerprint, type InstanceSshKeys } from './ssh-keys.js';

const { Server } = ssh2;

export interface SshdOptions {
  instanceId: number;
  /** The private host key (OpenSSH format). */
  hostKey: string;
  /** The identification after `SSH-2.0-` (the configured banner's software part). */
  ident: string;
  keys: InstanceSshKeys;
  /** The instance's directory and the environment its processes get. */
  container(): { dir: string; env: NodeJS.ProcessEnv };
  /** Wall ms a connection may take to log in (the listeners' hold_ms). */
  loginGraceMs: number;
  /** The faults in force now: every key refused; logged-in connections cut after this many wall ms. */
  faults(): { refuseKeys: boolean; dropAfterMs: number | null };
  /** Whether the container's keys are in place yet (an `ssh_keys_late` instance's are not, at first): every key is refused until then. */
  keysReady(): boolean;
  /** One of sshd's lines, written now (its sim moment). */
  log(line: { at: number; text: string }): void;
  simS(): number;
}

interface Conn {
  socket: Socket;
  from: string;
  identified: boolean;
  user: string | null;
  loggedIn: boolean;
  remoteEnded: boolean;
}

export class Sshd {
  private readonly conns = new Set<Conn>();
  private readonly procs = new Map<ChildProcess, Promise<void>>();
  private closed = false;

  constructor(private readonly o: SshdOptions) {}

  /** Serves one accepted connection. */
  inject(socket: Socket): void {
    if (this.closed) return void socket.destroy();
    const from = `${socket.remoteAddress ?? '127.0.0.1'} port ${socket.remotePort ?? 0}`;
    const conn: Conn = { socket, from, identified: false, user: null, loggedIn: false, remoteEnded: false };
    this.conns.add(conn);
    const grace = setTimeout(() => socket.destroy(), this.o.loginGraceMs);
    let drop: NodeJS.Timeout | undefined;
    // As OpenSSH's sshd: every session's socket has Nagle off (packet.c ssh_packet_set_interactive,
    // called from session.c do_exec_no_pty for exec and the sftp subsystem alike, sets set_nodelay).
    socket.setNoDelay(true);
    socket.on('end', () => (conn.remoteEnded = true));
    socket.on('error', () => undefined); // a client that resets is not our problem
    socket.once('close', () => {
      clearTimeout(grace);
      clearTimeout(drop);
      this.conns.delete(conn);
      for (const text of this.closeLines(conn)) this.say(text);
    });
    let server: InstanceType<typeof Server>;
    try {
      server = this.makeServer(conn, grace, (t) => (drop = t));
    } catch {
      return void socket.destroy(); // a host key ssh2 cannot read (ssh-keys.ts makes none): no sshd
    }
    server.injectSocket(socket);
  }

  private makeServer(conn: Conn, grace: NodeJS.Timeout, setDrop: (t: NodeJS.Timeout) => void): InstanceType<typeof Server> {
    const socket = conn.socket;
    return new Server({ hostKeys: [this.o.hostKey], ident: this.o.ident }, (client) => {
      conn.identified = true;
      client.on('error', () => undefined);
      client.on('authentication', (ctx) => this.authenticate(conn, ctx));
      client.on('ready', () => {
        conn.loggedIn = true;
        clearTimeout(grace);
        const after = this.o.faults().dropAfterMs;
        if (after !== null) setDrop(setTimeout(() => socket.destroy(), after));
      });
      client.on('session', (accept) => this.session(accept()));
      this.guard(client);
    });
  }

  /** The dropped-session fault: every open connection is cut now. */
  dropAll(): void {
    for (const c of this.conns) c.socket.destroy();
  }

  /** The container's sshd stops: connections cut, their processes killed; resolves once every process has closed. */
  async close(): Promise<void> {
    this.closed = true;
    this.dropAll();
    for (const child of this.procs.keys()) killGroup(child);
    await Promise.all(this.procs.values());
  }

  /** Port forwarding and other channels are not offered (not needed; refused as sshd with forwarding off). */
  private guard(client: Connection): void {
    client.on('tcpip', (_accept, reject) => reject());
    client.on('request', (accept, reject) => reject?.());
  }

  private authenticate(conn: Conn, ctx: AuthContext): void {
    conn.user = ctx.username;
    if (ctx.username !== 'root' || ctx.method !== 'publickey') return ctx.reject(['publickey']);
    const desc = `${keyType(ctx.key.algo)} ${fingerprint(ctx.key.data)}`;
    const key = this.o.faults().refuseKeys || !this.o.keysReady() ? null : this.o.keys.parsedKey(this.o.instanceId, ctx.key.data);
    const verified = key !== null && (ctx.signature === undefined || key.verify(ctx.blob!, ctx.signature, ctx.hashAlgo) === true);
    if (!verified) {
      this.say(`Failed publickey for root from ${conn.from} ssh2: ${desc}`);
      return ctx.reject(['publickey']);
    }
    // Without a signature the client only asks whether the key would do (RFC 4252 §7): no log line yet.
    if (ctx.signature !== undefined) this.say(`Accepted publickey for root from ${conn.from} ssh2: ${desc}`);
    ctx.accept();
  }

  /** One of sshd's lines, to the container log now. */
  private say(text: string): void {
    this.o.log({ at: this.o.simS(), text });
  }

  /** sshd's lines when a connection closes. */
  private closeLines(conn: Conn): string[] {
    if (!conn.identified)
      return ['error: kex_exchange_identification: Connection closed by remote host', `Connection closed by ${conn.from}`];
    if (!conn.loggedIn) {
      const who = conn.user === null ? '' : conn.user === 'root' ? 'authenticating user root ' : `invalid user ${conn.user} `;
      return [`Connection closed by ${who}${conn.from} [preauth]`];
    }
    if (conn.remoteEnded) {
      return [`Received disconnect from ${conn.from}:11: disconnected by user`, `Disconnected from user root ${conn.from}`];
    }
    return [`Connection reset by ${conn.from}`];
  }

  private session(session: Session): void {
    const env: Record<string, string> = {};
    let started = false;
    session.on('env', (accept, _reject, info) => {
      env[info.key] = info.val;
      accept?.();
    });
    session.on('pty', (accept) => accept?.());
    session.on('window-change', (accept) => accept?.());
    session.on('exec', (accept, reject, info) => {
      if (started) return reject?.();
      started = true;
      this.run(accept(), ['-c', info.command], env);
    });
    session.on('shell', (accept, reject) => {
      if (started) return reject?.();
      started = true;
      this.run(accept(), ['-i'], env);
    });
    session.on('sftp', (accept, reject) => {
      if (started) return reject?.();
      started = true;
      serveSftp(accept(), this.o.container().dir);
    });
    session.on('subsystem', (_accept, reject) => reject?.());
  }

  /** `/bin/sh ARGS` in the container, its output streamed to the channel, its end sent as the exit status. */
  private run(channel: ServerChannel, args: string[], sessionEnv: Record<string, string>): void {
    let container: { dir: string; env: NodeJS.ProcessEnv };
    try {
      container = this.o.container();
    } catch (e) {
      channel.stderr.write(`sh: cannot enter the container: ${String(e)}\n`);
      channel.exit(127);
      return void channel.end();
    }
    const child = spawn('/bin/sh', args, {
      cwd: container.dir,
      detached: true, // its own process group: a closed channel kills the command's children too
      stdio: ['pipe', 'pipe', 'pipe'],
      ...runAs(),
      env: { ...container.env, USER: 'root', LOGNAME: 'root', SHELL: '/bin/sh', ...sessionEnv },
    });
    const done = new Promise<void>((resolve) => {
      let finished = false;
      const finish = (code: number | null, signal: NodeJS.Signals | null, error?: Error) => {
        if (finished) return;
        finished = true;
        this.procs.delete(child);
        resolve();
        if (error) channel.stderr.write(`sh: ${error.message}\n`);
        // The status after the output: once what is buffered for the client has gone out.
        const end = () => {
          if (signal) channel.exit(signal.replace(/^SIG/, ''), false, '');
          else channel.exit(code ?? 127);
          channel.end();
        };
        if (channel.writableNeedDrain) channel.once('drain', end);
        else end();
      };
      child.on('close', (code, signal) => finish(code, signal));
      child.on('error', (e) => finish(null, null, e));
    });
    this.procs.set(child, done);
    child.stdin!.on('error', () => undefined);
    channel.pipe(child.stdin!);
    channel.on('close', () => killGroup(child));
    child.stdout!.pipe(channel, { end: false });
    child.stderr!.pipe(channel.stderr, { end: false });
  }
}

/** sshd's name of a key type in its log: ED25519, RSA, ECDSA. */
function keyType(algo: string): string {
  if (algo.includes('ed25519')) return 'ED25519';
  if (algo.startsWith('ecdsa') || algo.includes('ecdsa')) return 'ECDSA';
  if (algo.includes('rsa')) return 'RSA';
  return algo.toUpperCase();
}

/** Kills the process group of a session's command (its children too). */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}
