// The control token: the bearer secret of the control API, kept in BERTH_HOME/control.token (0600).
// It is never empty: an empty or damaged file (a full disk at first start) is replaced by a new
// token, because an empty token once meant "no authentication". It is written to a temporary file,
// synced and renamed, so a reader sees the old token or the new one, never a part.
//
// Both the daemon (which serves with it) and the CLI (which sends it, and `berth token rotate`)
// read this file; the proof that a daemon holds it is src/wire/control-proof.ts.
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { StoreError } from '../errors.js';

const TOKEN_FILE = 'control.token';

/** base64url of 24 random bytes: 32 characters. Anything shorter or of other characters is not ours. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{32,}$/;

const tokenPath = (home: string) => join(home, TOKEN_FILE);

export function isUsableToken(token: string | undefined): token is string {
  return token !== undefined && TOKEN_PATTERN.test(token);
}

/** The token in BERTH_HOME, or undefined when the file is missing, empty or damaged. */
export function readControlToken(home: string): string | undefined {
  try {
    const token = readFileSync(tokenPath(home), 'utf8').trim();
    return isUsableToken(token) ? token : undefined;
  } catch {
    return undefined;
  }
}

/** Writes a new token (atomically, 0600) and returns it. */
export function writeNewControlToken(home: string): string {
  const token = randomBytes(24).toString('base64url');
  const path = tokenPath(home);
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, token);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw new StoreError(
      `Cannot write ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)}): check that BERTH_HOME exists and is writable, and that the disk is not full.`,
      err,
    );
  }
  return token;
}

/** The token to serve with: the existing one, or a new one when there is none usable. */
export function ensureControlToken(home: string): { token: string; replaced: boolean } {
  const existing = readControlToken(home);
  if (existing) return { token: existing, replaced: false };
  return { token: writeNewControlToken(home), replaced: true };
}
