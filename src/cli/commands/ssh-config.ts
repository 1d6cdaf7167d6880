// `berth ssh-config RUN [--write]` (issue #50): an OpenSSH `Host` block for the run's instance, so
// that `ssh`, `scp`, `rsync` and VS Code's Remote-SSH reach it by name (`ssh berth-RUN`) with
// berth's key. Printed, or with --write kept in BERTH_HOME/ssh/config (one block per run, a run's
// block replaced when written again) and that file included from ~/.ssh/config, at its top as
// SkyPilot does for its clusters (`Include ~/.sky/generated/ssh/*`): an Include below a `Host` line
// would apply to that host alone.
//
// Host keys: each instance has its own known_hosts file (BERTH_HOME/ssh/known_hosts.d/<instance>),
// trusted at the first login (`StrictHostKeyChecking accept-new`) as berth pins a host key at its
// first login (docs/ssh.md). Per instance because the service's SSH proxy hands its ports to other
// instances over time: one shared file would call the next instance on a reused port a changed key.
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, realpathSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { berthHome } from '../../config/home.js';
import { loadConfig } from '../../config/load.js';
import { loadLoginKey } from '../../ssh/key-pair.js';
import type { SshEndpoint } from '../../ssh/session.js';
import type { Run } from '../../wire/control-api.js';
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import type { Io } from '../io.js';
import { noSshInstance, sshEndpointsOf } from '../run-ssh-endpoints.js';

export interface SshConfigOptions {
  config?: string;
  write?: boolean;
}

export async function sshConfigCommand(runId: string, options: SshConfigOptions, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const run = await connectToDaemon(env).getRun(runId);
  const endpoint = sshEndpointsOf(run)[0];
  if (!run.instance || !endpoint) throw noSshInstance(run);
  const home = berthHome(env);
  const { config } = loadConfig({ configFile: options.config }, env);
  const key = loadLoginKey({ home, privateKeyPath: config.ssh.private_key_path });
  const knownHosts = join(home, 'ssh', 'known_hosts.d', String(run.instance.id));
  const block = hostBlock(run, endpoint, key.path, knownHosts);
  if (!options.write) {
    io.out(block.trimEnd());
    return EXIT.ok;
  }
  mkdirSync(dirname(knownHosts), { recursive: true, mode: 0o700 });
  const berthConfig = join(home, 'ssh', 'config');
  writePrivate(berthConfig, withBlock(existsSync(berthConfig) ? readFileSync(berthConfig, 'utf8') : '', run, block));
  const userConfig = realTarget(join(env.HOME || homedir(), '.ssh', 'config'));
  const included = includeIn(userConfig, berthConfig);
  io.out(`Wrote Host ${hostAliases(run).join(' ')} to ${berthConfig}${included ? `, included from ${userConfig}` : ''}.`);
  io.out(`Try: ssh ${hostAliases(run)[0]}   (also scp, rsync -e ssh, VS Code Remote-SSH)`);
  return EXIT.ok;
}

/** The names the block answers to: the run's id, and its name where OpenSSH can take it as one. */
export function hostAliases(run: Pick<Run, 'id' | 'name'>): string[] {
  const byName = /^[A-Za-z0-9._-]+$/.test(run.name) && run.name !== run.id ? [`berth-${run.name}`] : [];
  return [`berth-${run.id}`, ...byName];
}

/** One run's Host block, between the markers that let --write replace it. */
export function hostBlock(run: Pick<Run, 'id' | 'name'>, endpoint: SshEndpoint, keyPath: string, knownHosts: string): string {
  return [
    `# berth run ${run.id}`,
    `Host ${hostAliases(run).join(' ')}`,
    `  HostName ${endpoint.host}`,
    `  Port ${endpoint.port}`,
    '  User root',
    `  IdentityFile ${configWord(keyPath)}`,
    '  IdentitiesOnly yes',
    `  UserKnownHostsFile ${configWord(knownHosts)}`,
    '  StrictHostKeyChecking accept-new',
    `# end berth run ${run.id}`,
    '',
  ].join('\n');
}

/**
 * berth's config file with this run's block put in: its earlier block replaced, and any other
 * block that answers to one of its names (an ended run of the same name) dropped, since OpenSSH
 * takes the first block that matches.
 */
export function withBlock(text: string, run: Pick<Run, 'id' | 'name'>, block: string): string {
  const names = new Set(hostAliases(run));
  const blocks = text.split(/(?=^# berth run \S+$)/m).filter((b) => b.trim() !== '');
  const kept = blocks.filter((b) => {
    const host = /^Host (.+)$/m.exec(b)?.[1]?.split(/\s+/) ?? [];
    return !b.startsWith(`# berth run ${run.id}\n`) && !host.some((h) => names.has(h));
  });
  return [...kept.map((b) => b.trimEnd() + '\n'), block].join('\n');
}

/** Puts `Include FILE` at the top of the user's ssh config unless it is there; whether it wrote one. */
function includeIn(userConfig: string, file: string): boolean {
  const text = existsSync(userConfig) ? readFileSync(userConfig, 'utf8') : '';
  const line = `Include ${configWord(file)}`;
  if (text.split('\n').some((l) => l.trim() === line)) return false;
  mkdirSync(dirname(userConfig), { recursive: true, mode: 0o700 });
  writePrivate(userConfig, `# added by berth ssh-config: the Host blocks of berth's runs\n${line}\n\n${text}`);
  return true;
}

/** The file a symlinked config (dotfiles) points to, so that the rename keeps the link. */
function realTarget(path: string): string {
  try {
    return lstatSync(path).isSymbolicLink() ? realpathSync(path) : path;
  } catch {
    return path;
  }
}

/** Written whole (a temp file renamed), readable by its owner alone, as OpenSSH wants its config. */
function writePrivate(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.berth-${process.pid}`;
  writeFileSync(tmp, text, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

/** A path as ssh_config reads it: in double quotes when it holds a space. */
function configWord(path: string): string {
  return /\s/.test(path) ? `"${path}"` : path;
}
