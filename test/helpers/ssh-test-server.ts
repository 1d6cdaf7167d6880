// A real SSH server for tests of src/ssh/: ssh2's Server on a loopback port, publickey logins for
// the keys it is given, and `exec` run as a real `sh -c` process. Not the simulator's sshd: a
// small stand-in that tests can bend (refuse everyone, change its host key, drop a session, serve
// SFTP through a handler the test gives, e.g. the simulator's sftp-server over a temp folder).
import { spawn, type ChildProcess } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import ssh2, { type SFTPWrapper } from 'ssh2';
import { fingerprintOf, generateEd25519 } from '../../src/ssh/key-pair.js';

export interface SshTestServer {
  port: number;
  /** The SHA256 fingerprint of the host key it offers now. */
  hostKey: string;
  /** Logins refused and accepted so far. */
  refused: number;
  accepted: number;
  /** Ends every connection (as a dropped network would). */
  dropAll(): void;
  close(): Promise<void>;
}

export async function startSshTestServer(opts: {
  authorizedKeys: string[];
  hostKey?: string;
  /** Serves each session's `sftp` subsystem; none: SFTP is refused. */
  sftp?: (stream: SFTPWrapper) => void;
}): Promise<SshTestServer> {
  const hostKeyText = opts.hostKey ?? generateEd25519('test host').private;
  const parsedHost = ssh2.utils.parseKey(hostKeyText);
  if (parsedHost instanceof Error || Array.isArray(parsedHost)) throw new Error('bad host key');
  const allowed = opts.authorizedKeys.map((line) => {
    const k = ssh2.utils.parseKey(line);
    if (k instanceof Error || Array.isArray(k)) throw new Error('bad authorized key');
    return k;
  });
  const clients = new Set<ssh2.Connection>();
  const children = new Set<ChildProcess>();
  const state = { refused: 0, accepted: 0 };

  const server = new ssh2.Server({ hostKeys: [hostKeyText] }, (client) => {
    clients.add(client);
    // As OpenSSH's sshd (packet.c ssh_packet_set_interactive); ssh2's types omit the method.
    (client as unknown as { setNoDelay(on: boolean): void }).setNoDelay(true);
    client.on('error', () => {});
    client.on('close', () => clients.delete(client));
    client.on('authentication', (ctx) => {
      if (ctx.method !== 'publickey' || ctx.username !== 'root') return ctx.reject(['publickey']);
      const key = allowed.find((k) => k.type === ctx.key.algo && timingSafeEqualBuf(k.getPublicSSH(), ctx.key.data));
      if (!key) {
        state.refused++;
        return ctx.reject(['publickey']);
      }
      // The first publickey message only asks whether the key would do; the signed one logs in.
      if (!ctx.signature) return ctx.accept();
      if (!key.verify(ctx.blob!, ctx.signature, ctx.hashAlgo)) return ctx.reject(['publickey']);
      state.accepted++;
      ctx.accept();
    });
    client.on('ready', () => {
      client.on('session', (accept) => {
        const session = accept();
        session.on('sftp', (acceptSftp, reject) => (opts.sftp ? opts.sftp(acceptSftp()) : reject()));
        session.on('exec', (acceptExec, _reject, info) => {
          const stream = acceptExec();
          const child = spawn('sh', ['-c', info.command], { stdio: ['pipe', 'pipe', 'pipe'] });
          children.add(child);
          child.stdout.pipe(stream, { end: false });
          child.stderr.pipe(stream.stderr, { end: false });
          stream.pipe(child.stdin);
          stream.on('signal', () => child.kill('SIGKILL'));
          stream.on('close', () => child.kill('SIGKILL'));
          child.on('close', (code, signal) => {
            children.delete(child);
            if (signal) stream.exit(signal.replace(/^SIG/, ''), false, '');
            else stream.exit(code ?? 0);
            stream.end();
          });
        });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    hostKey: fingerprintOf(parsedHost.getPublicSSH()),
    get refused() {
      return state.refused;
    },
    get accepted() {
      return state.accepted;
    },
    dropAll() {
      for (const c of clients) c.end();
    },
    async close() {
      for (const child of children) child.kill('SIGKILL');
      for (const c of clients) c.end();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function timingSafeEqualBuf(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
