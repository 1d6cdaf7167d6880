// `berth ssh RUN [-- COMMAND...]`: logs in as root to the run's current instance with berth's key
// (the same BERTH_HOME, or ssh.private_key_path) and runs COMMAND, its output passed through and
// its exit code berth's; without COMMAND, a shell (a pseudo-terminal when stdin is a terminal).
// `--print` prints the `ssh` command that does the same instead. The instance's endpoints come from
// the daemon's run view (`instance.ssh`: the direct address first, the proxy otherwise); its host
// key is pinned per instance in BERTH_HOME/ssh/host_pins.json at the first login (docs/ssh.md).
import { join } from 'node:path';
import { berthHome } from '../../config/home.js';
import { loadConfig } from '../../config/load.js';
import { BerthError } from '../../errors.js';
import { hostPinsFile } from '../../ssh/host-pins.js';
import { loadLoginKey } from '../../ssh/key-pair.js';
import { openSshSession, type SshSession } from '../../ssh/session.js';
import type { Run } from '../../wire/control-api.js';
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
  } catch (err) {
    if (!(err instanceof BerthError) || err.code !== 'ssh_dropped') throw err;
    throw await whyCut(run, err, () => connectToDaemon(env).getRun(run.id));
  } finally {
    session.close();
  }
}

/**
 * A session cut: because the run's instance went (its task ended, a cancel, a limit, a loss), said
 * with what became of the run (issue #50: "the connection closed" alone left users guessing); the
 * drop itself otherwise.
 */
/** How many half-seconds a cut session waits for its run's destroy to be confirmed before it says why. */
const DESTROY_WAIT_TRIES = 20;

async function whyCut(before: Run, drop: BerthError, runNow: () => Promise<Run>): Promise<BerthError> {
  const id = before.instance!.id;
  let now: Run;
  try {
    now = await runNow();
    // Being destroyed: why is known once the destroy is confirmed, seconds later (waited for a while).
    for (let i = 0; i < DESTROY_WAIT_TRIES && now.state === 'destroying'; i++) {
      await new Promise((r) => setTimeout(r, 500));
      now = await runNow();
    }
  } catch {
    return drop;
  }
  // Still held and not being destroyed: the link dropped, not the instance.
  if (now.instance?.id === id && now.state !== 'destroying') return drop;
  const attempt = now.attempts.find((a) => a.instance_id === id);
  const exit = now.error?.exit_code ?? (attempt?.outcome === 'succeeded' ? 0 : undefined);
  const what =
    now.task && (attempt?.outcome === 'succeeded' || attempt?.outcome === 'task_failed')
      ? `run ${now.id}'s task ended${exit !== undefined ? ` (exit ${exit})` : ''}`
      : now.state === 'cancelled'
        ? `run ${now.id} was cancelled`
        : `run ${now.id}'s attempt ended ${attempt?.outcome ?? 'without an outcome yet'}`;
  return new BerthError(
    'ssh_dropped',
    `The SSH session ended: ${what}, and berth gave up its instance ${id} (the run is ${now.state} now).`,
  );
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
    return await new Promise<number>((resolve, reject) => {
      let code: number | undefined;
      channel.on('exit', (c: number | null, signal?: string) => {
        code = typeof c === 'number' ? c : 128 + (signalNumber(signal ?? null) ?? 127);
      });
      // Closed with no exit status: the connection went, not the shell (never a quiet exit 0).
      channel.once('close', () =>
        code !== undefined ? resolve(code) : reject(new BerthError('ssh_dropped', 'The SSH session ended without an exit status.')),
      );
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
