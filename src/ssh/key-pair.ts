// The key berth logs in to its instances with: its own ed25519 pair in BERTH_HOME/ssh/ (made on
// first need), or the user's private key named by `ssh.private_key_path`. Either way the private
// key is checked the way OpenSSH checks it (not readable by group or others, not encrypted: berth
// runs unattended and has no passphrase to give), and its public line and SHA256 fingerprint are
// derived from the private key itself, so a stale or missing .pub file cannot mislead.
//
// The private key's bytes live only in `BerthKey.privateKey`; no message built here quotes them
// or anything ssh2 said while parsing them.
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import ssh2 from 'ssh2';
import { BerthError } from '../errors.js';

export interface BerthKey {
  /** The private key file. */
  path: string;
  /** `berth`: berth's own pair in BERTH_HOME/ssh; `user`: the file `ssh.private_key_path` names. */
  source: 'berth' | 'user';
  /** The private key, OpenSSH or PEM text as read. Never logged, never sent anywhere but to ssh2. */
  privateKey: Buffer;
  /** The public key line as authorized_keys holds it: `ssh-ed25519 AAAA... berth`. */
  publicLine: string;
  /** As `ssh-keygen -l` prints it: `SHA256:` and the unpadded base64 of the key blob's SHA-256. */
  fingerprint: string;
}

/** berth's own key pair: BERTH_HOME/ssh/id_ed25519 (and .pub). */
export function berthKeyPath(home: string): string {
  return join(home, 'ssh', 'id_ed25519');
}

/**
 * The key to log in with: the user's when `privateKeyPath` is set (never made), else berth's own,
 * made on first need. Throws `ssh_key` naming the file and the fix when the key cannot be used.
 */
export function loadLoginKey({ home, privateKeyPath }: { home: string; privateKeyPath?: string | null | undefined }): BerthKey {
  if (privateKeyPath) return readKey(expandHome(privateKeyPath), 'user');
  const path = berthKeyPath(home);
  if (!exists(path)) createBerthKey(path);
  return readKey(path, 'berth');
}

/** `SHA256:<base64, no padding>` of an SSH public key blob, as OpenSSH prints fingerprints. */
export function fingerprintOf(publicBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(publicBlob).digest('base64').replace(/=+$/, '')}`;
}

/** The key part of a public key line (`type base64`), without its comment: what makes two lines the same key. */
export function publicKeyPart(line: string): string {
  return line.trim().split(/\s+/).slice(0, 2).join(' ');
}

function readKey(path: string, source: BerthKey['source']): BerthKey {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    throw keyError(
      path,
      missing ? 'does not exist' : 'cannot be read',
      source === 'user' ? 'set ssh.private_key_path to an existing private key file' : 'remove it so that berth makes a new one',
      err,
    );
  }
  // OpenSSH refuses such a key ("UNPROTECTED PRIVATE KEY FILE"); so does berth, before it is used.
  if ((mode & 0o077) !== 0) {
    throw keyError(path, `is readable by others (mode ${(mode & 0o777).toString(8).padStart(4, '0')})`, `run: chmod 600 ${path}`);
  }
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch (err) {
    throw keyError(path, 'cannot be read', 'make it readable by the user berth runs as', err);
  }
  const parsed = ssh2.utils.parseKey(data);
  // ssh2's parse error is not quoted: it is about the file's content.
  if (parsed instanceof Error) {
    const encrypted = /passphrase|encrypted/i.test(parsed.message);
    throw encrypted
      ? keyError(
          path,
          'is encrypted (berth runs unattended and cannot give a passphrase)',
          "use a key without a passphrase, e.g. one made for berth: ssh-keygen -t ed25519 -N '' -f ~/.ssh/berth",
        )
      : keyError(path, 'is not an SSH private key berth can read', 'give an OpenSSH or PEM private key (ed25519, ecdsa or rsa)');
  }
  const key = Array.isArray(parsed) ? (parsed[0] as ssh2.ParsedKey | undefined) : parsed;
  if (!key?.isPrivateKey()) {
    throw keyError(path, 'holds a public key, not a private one', 'name the private key file (the one without .pub)');
  }
  const blob = key.getPublicSSH();
  return {
    path,
    source,
    privateKey: data,
    publicLine: `${key.type} ${blob.toString('base64')} ${key.comment || 'berth'}`,
    fingerprint: fingerprintOf(blob),
  };
}

/**
 * Makes berth's pair. The private file is written whole under a temporary name (0600) and then
 * linked into place: a crash leaves no half key, and two processes making it at once (the daemon
 * and `berth ssh`) end up with the same one, the first link's.
 */
function createBerthKey(path: string): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const pair = generateEd25519('berth');
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeWhole(tmp, pair.private, 0o600);
  try {
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw keyError(path, 'cannot be written', `check that ${dir} is writable`, err);
  } finally {
    unlinkSync(tmp);
  }
  // The .pub is for the user (ssh-copy-id, --print); berth itself derives the public key from the private one.
  const pubTmp = `${path}.pub.${process.pid}.tmp`;
  const key = ssh2.utils.parseKey(readFileSync(path));
  if (key instanceof Error || Array.isArray(key)) return;
  writeWhole(pubTmp, `${key.type} ${key.getPublicSSH().toString('base64')} berth\n`, 0o644);
  try {
    linkSync(pubTmp, `${path}.pub`);
  } catch {
    // Another process wrote it first, with the same content.
  } finally {
    unlinkSync(pubTmp);
  }
}

/**
 * An ed25519 pair in OpenSSH format that parses back. ssh2 1.17's generator strips every leading
 * zero byte of the public key, not only DER's unused-bits byte, so one pair in 256 (a public key
 * starting with 0x00) comes out 31 bytes long and unreadable by ssh2 and OpenSSH alike
 * (mscdex/ssh2 issues #1390, #1513, open): such a pair is thrown away and another made.
 */
export function generateEd25519(comment: string): { private: string; public: string } {
  for (let tries = 0; ; tries++) {
    const pair = ssh2.utils.generateKeyPairSync('ed25519', { comment });
    const priv = ssh2.utils.parseKey(pair.private);
    if (!(priv instanceof Error) && !(ssh2.utils.parseKey(pair.public) instanceof Error)) return pair;
    if (tries >= 20) throw new BerthError('ssh_key', 'Could not make an ed25519 key pair that parses back (ssh2 keygen).');
  }
}

function writeWhole(path: string, text: string, mode: number): void {
  const fd = openSync(path, 'wx', mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

function expandHome(path: string): string {
  return path === '~' || path.startsWith('~/') ? join(homedir(), path.slice(1)) : path;
}

function keyError(path: string, what: string, fix: string, cause?: unknown): BerthError {
  return new BerthError('ssh_key', `The SSH private key ${path} ${what}: ${fix}.`, cause === undefined ? {} : { cause });
}
