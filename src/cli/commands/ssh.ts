// `berth ssh RUN [-- COMMAND...]`: logs in as root to the run's current instance with berth's key
// (the same BERTH_HOME, or ssh.private_key_path) and runs COMMAND, its output passed through and
// its exit code berth's; without COMMAND, a shell (a pseudo-terminal when stdin is a terminal).
// `--print` prints the `ssh` command that does the same instead. The instance's endpoints come from
// the daemon's run view (`instance.ssh`: the direct address first, the proxy otherwise); its host
// key is pinned per instance in BERTH_HOME/ssh/host_pins.json at the first login (docs/ssh.md).
import { join } from 'node:path';
import { berthHome } from '../../config/home.js';
import { loadConfig } from '../../config/load.js';
import { hostPinsFile } from '../../ssh/host-pins.js';
import { loadLoginKey } from '../../ssh/key-pair.js';
import { openSshSession, type SshSession } from '../../ssh/session.js';
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { noSshInstance, sshEndpointsOf } from '../run-ssh-endpoints.js';
import type { Io } from '../io.js';

export interface SshOptions {
  config?: string;
  print?: boolean;
}

export async function sshCommand(runId: string, command: string[], options: SshOptions, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const run = await connectToDaemon(env).getRun(runId);
  const instance = run.instance;
  const endpoints = sshEndpointsOf(run);
  if (!instance || endpoints.length === 0) throw noSshInstance(run);
  const { config } = loadConfig({ configFile: options.config }, env);
  const key = loadLoginKey({ home: berthHome(env), privateKeyPath: config.ssh.private_key_path });

  if (options.print) {
    const e = endpoints[0]!;
    // ssh joins its command words with spaces for the remote shell, as berth does: one quoted word says the same.
    const remote = command.length > 0 ? ` ${shellQuote(command.join(' '))}` : '';
    io.out(`ssh -i ${shellQuote(key.path)} -p ${e.port} root@${e.host}${remote}`);
    return EXIT.ok;
  }

  const pins = hostPinsFile(join(berthHome(env), 'ssh', 'host_pins.json'));
  const session = await openSshSession({
    endpoints,
    key,
    verifyHostKey: (fingerprint) => pins.verify(instance.id, fingerprint),
  });
  try {
    return command.length > 0 ? await runCommand(session, command.join(' ')) : await runShell(session, env);
  } finally {
    session.close();
  }
}

/** One command, its output passed through as it comes; its exit code is berth's (a signal: 128 + its number, as a shell says). */
async function runCommand(session: SshSession, command: string): Promise<number> {
  // Input that is not a terminal goes to the command (`echo x | berth ssh RUN -- cat`); a terminal's does not.
  const stdin = process.stdin.isTTY ? undefined : process.stdin;
  try {
    const result = await session.exec(command, {
      ...(stdin ? { stdin } : {}),
      onStdout: (c) => process.stdout.write(c),
      onStderr: (c) => process.stderr.write(c),
      maxOutputBytes: 0,
    });
    if (result.code !== null) return result.code;
    return 128 + (signalNumber(result.signal) ?? 127);
  } finally {
    stdin?.unpipe();
    stdin?.destroy();
  }
}

async function runShell(session: SshSession, env: NodeJS.ProcessEnv): Promise<number> {
  const tty = process.stdin.isTTY && process.stdout.isTTY;
  const channel = await session.shell(
    tty ? { term: env.TERM || 'xterm-256color', rows: process.stdout.rows, cols: process.stdout.columns } : false,
  );
  const onResize = () => channel.setWindow(process.stdout.rows, process.stdout.columns, 0, 0);
  if (tty) {
    process.stdin.setRawMode(true);
    process.stdout.on('resize', onResize);
  }
  process.stdin.pipe(channel);
  channel.pipe(process.stdout, { end: false });
  channel.stderr.pipe(process.stderr, { end: false });
  try {
    return await new Promise<number>((resolve) => {
      let code = 0;
      channel.on('exit', (c: number | null, signal?: string) => {
        code = typeof c === 'number' ? c : 128 + (signalNumber(signal ?? null) ?? 127);
      });
      channel.once('close', () => resolve(code));
    });
  } finally {
    if (tty) {
      process.stdin.setRawMode(false);
      process.stdout.off('resize', onResize);
    }
    process.stdin.unpipe(channel);
    process.stdin.destroy();
  }
}

const SIGNALS: Record<string, number> = { HUP: 1, INT: 2, QUIT: 3, ABRT: 6, KILL: 9, SEGV: 11, PIPE: 13, ALRM: 14, TERM: 15 };

function signalNumber(name: string | null): number | undefined {
  return name === null ? undefined : SIGNALS[name.replace(/^SIG/, '')];
}

/** A word as a POSIX shell reads it back unchanged. */
function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
