// The files bench's server, in a process of its own (`node dist/bench/files-sshd.js ROOT PUBKEY`):
// an SSH server (the `ssh2` package's, as the simulator's sshd) whose SFTP subsystem is the
// simulator's own (src/sim/ssh-sftp.ts) on ROOT as the container's /root, and whose commands run
// as `sh -c` with HOME=ROOT; and two TCP relays in front of it (bench/tcp-relay.ts), one adding
// nothing and one 50 ms each way. Apart from the bench's process so that berth's client and
// OpenSSH's `sftp`, each in its own process, meet the same server and relays, neither sharing its
// event loop. Prints `{"port":..,"relays":{"0":..,"50":..}}` once listening; ends with its stdin.
import { spawn } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { serveSftp } from '../src/sim/ssh-sftp.js';
import { generateEd25519 } from '../src/ssh/key-pair.js';
import { startTcpRelay } from './tcp-relay.js';

const [root, pubkey] = process.argv.slice(2) as [string, string];
const allowed = ssh2.utils.parseKey(pubkey);
if (allowed instanceof Error || Array.isArray(allowed)) throw new Error('bad public key');
const tmp = join(root, 'tmp');
mkdirSync(tmp, { recursive: true });

const server = new ssh2.Server({ hostKeys: [generateEd25519('bench host').private] }, (client) => {
  // As OpenSSH's sshd (packet.c ssh_packet_set_interactive); ssh2's types omit the method.
  (client as unknown as { setNoDelay(on: boolean): void }).setNoDelay(true);
  client.on('error', () => undefined);
  client.on('authentication', (ctx) => {
    if (ctx.method !== 'publickey' || ctx.username !== 'root') return ctx.reject(['publickey']);
    const mine = allowed.getPublicSSH();
    if (ctx.key.algo !== allowed.type || ctx.key.data.length !== mine.length || !timingSafeEqual(ctx.key.data, mine))
      return ctx.reject(['publickey']);
    // The first publickey message only asks whether the key would do; the signed one logs in.
    if (!ctx.signature) return ctx.accept();
    return allowed.verify(ctx.blob!, ctx.signature, ctx.hashAlgo) ? ctx.accept() : ctx.reject(['publickey']);
  });
  client.on('session', (accept) => {
    const session = accept();
    session.on('sftp', (acceptSftp) => serveSftp(acceptSftp(), root));
    session.on('exec', (acceptExec, _reject, info) => {
      const stream = acceptExec();
      const child = spawn('sh', ['-c', info.command], { cwd: root, env: { ...process.env, HOME: root, TMPDIR: tmp }, stdio: 'pipe' });
      child.stdout.pipe(stream, { end: false });
      child.stderr.pipe(stream.stderr, { end: false });
      stream.pipe(child.stdin);
      stream.on('close', () => child.kill('SIGKILL'));
      child.on('close', (code) => {
        stream.exit(code ?? 1);
        stream.end();
      });
    });
  });
});

server.listen(0, '127.0.0.1', async () => {
  const port = (server.address() as AddressInfo).port;
  const near = await startTcpRelay({ host: '127.0.0.1', port });
  const far = await startTcpRelay({ host: '127.0.0.1', port }, { delayMs: 50 });
  process.stdout.write(`${JSON.stringify({ port, relays: { 0: near.port, 50: far.port } })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
});
