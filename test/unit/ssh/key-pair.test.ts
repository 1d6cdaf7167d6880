import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthError } from '../../../src/errors.js';
import ssh2 from 'ssh2';
import { berthKeyPath, generateEd25519, loadLoginKey } from '../../../src/ssh/key-pair.js';

let home: string;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'key-pair-'));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

const codeOf = (fn: () => unknown): { code: string; message: string } => {
  try {
    fn();
  } catch (err) {
    if (err instanceof BerthError) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error('did not throw');
};

const hasSshKeygen = (() => {
  try {
    execFileSync('ssh-keygen', ['-?'], { stdio: 'ignore' });
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOENT';
  }
})();

describe("berth's own key pair", () => {
  it('is always a pair that parses back (ssh2 alone makes a broken one in 256)', () => {
    for (let i = 0; i < 1500; i++) {
      const pair = generateEd25519('berth');
      const priv = ssh2.utils.parseKey(pair.private);
      if (priv instanceof Error || Array.isArray(priv)) throw new Error(`pair ${i} does not parse`);
      expect(priv.getPublicSSH().length).toBe(51);
    }
  });

  it('is made on first need: ed25519 in OpenSSH format, private file 0600 in a 0700 directory, with its .pub', () => {
    const key = loadLoginKey({ home });
    const path = berthKeyPath(home);
    expect(key.path).toBe(path);
    expect(key.source).toBe('berth');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, 'ssh')).mode & 0o777).toBe(0o700);
    expect(readFileSync(path, 'utf8')).toMatch(/^-----BEGIN OPENSSH PRIVATE KEY-----/);
    expect(key.publicLine).toMatch(/^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\S+ berth$/);
    expect(readFileSync(`${path}.pub`, 'utf8').trim()).toBe(key.publicLine);
  });

  it('is the same key on every later load', () => {
    const first = loadLoginKey({ home });
    const again = loadLoginKey({ home });
    expect(again.fingerprint).toBe(first.fingerprint);
    expect(again.privateKey.equals(first.privateKey)).toBe(true);
  });

  it.runIf(hasSshKeygen)('has the fingerprint ssh-keygen prints for it', () => {
    const key = loadLoginKey({ home });
    const printed = execFileSync('ssh-keygen', ['-l', '-f', `${key.path}.pub`], { encoding: 'utf8' });
    expect(printed.split(' ')[1]).toBe(key.fingerprint);
  });

  it('is refused, naming the file and the fix, once readable by others', () => {
    const key = loadLoginKey({ home });
    chmodSync(key.path, 0o644);
    const e = codeOf(() => loadLoginKey({ home }));
    expect(e.code).toBe('ssh_key');
    expect(e.message).toContain(key.path);
    expect(e.message).toContain(`chmod 600 ${key.path}`);
  });
});

describe("the user's key (ssh.private_key_path)", () => {
  it('is used as it is, never replaced by a new one', () => {
    const own = loadLoginKey({ home: join(home, 'other') });
    const path = join(home, 'mine');
    writeFileSync(path, own.privateKey, { mode: 0o600 });
    const key = loadLoginKey({ home, privateKeyPath: path });
    expect(key.source).toBe('user');
    expect(key.fingerprint).toBe(own.fingerprint);
    expect(() => statSync(berthKeyPath(home))).toThrow();
  });

  it('is refused when missing, naming the field to fix', () => {
    const e = codeOf(() => loadLoginKey({ home, privateKeyPath: join(home, 'nope') }));
    expect(e.code).toBe('ssh_key');
    expect(e.message).toMatch(/does not exist: set ssh\.private_key_path/);
  });

  it.runIf(hasSshKeygen)('is refused when encrypted, with a way to make one berth can use', () => {
    const path = join(home, 'locked');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'a passphrase', '-f', path]);
    const e = codeOf(() => loadLoginKey({ home, privateKeyPath: path }));
    expect(e.code).toBe('ssh_key');
    expect(e.message).toContain(path);
    expect(e.message).toMatch(/encrypted.*ssh-keygen -t ed25519 -N ''/);
  });

  it('is refused when it is a public key, and the message quotes nothing of the file', () => {
    const own = loadLoginKey({ home: join(home, 'other') });
    const path = join(home, 'pub');
    writeFileSync(path, own.publicLine, { mode: 0o600 });
    const e = codeOf(() => loadLoginKey({ home, privateKeyPath: path }));
    expect(e.code).toBe('ssh_key');
    expect(e.message).toMatch(/public key, not a private one/);
    expect(e.message).not.toContain(own.publicLine.split(' ')[1]!);
  });

  it('is refused when readable by its group', () => {
    const own = loadLoginKey({ home: join(home, 'other') });
    const path = join(home, 'grp');
    writeFileSync(path, own.privateKey, { mode: 0o640 });
    chmodSync(path, 0o640);
    expect(codeOf(() => loadLoginKey({ home, privateKeyPath: path })).message).toMatch(/readable by others \(mode 0640\)/);
  });
});
