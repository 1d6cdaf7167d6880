// berth's SSH private key never reaches a log line or an error message: a BerthKey logged whole
// (at any depth the logger's paths reach) shows no byte of it, and no error about a key file quotes
// the file.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { BerthError, toRunError } from '../../../src/errors.js';
import { createLogger } from '../../../src/logger.js';
import { loadLoginKey, type BerthKey } from '../../../src/ssh/key-pair.js';

let home: string;
let key: BerthKey;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'key-secrecy-'));
  key = loadLoginKey({ home });
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

/** The lines of the key file's base64 body: none may show anywhere. */
const bodyLines = (): string[] =>
  readFileSync(key.path, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0 && !l.startsWith('-----'));

function expectNoKey(text: string): void {
  for (const line of bodyLines()) expect(text).not.toContain(line);
  expect(text).not.toContain('BEGIN OPENSSH PRIVATE KEY');
}

it('a BerthKey logged whole, at the top or nested, shows its fingerprint but not its private key', () => {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString('utf8'));
      cb();
    },
  });
  const log = createLogger({ destination, level: 'debug' });
  log.info(key, 'top');
  log.info({ key }, 'nested');
  log.info({ ssh: { key } }, 'deeper');
  log.info({ ssh: { private_key: key.privateKey.toString('utf8') } }, 'as text');
  const all = lines.join('');
  expect(lines).toHaveLength(4);
  expect(all).toContain(key.fingerprint);
  expectNoKey(all);
});

it('no error about a key file quotes it: a broken copy, a group-readable one, a public key', () => {
  const text = readFileSync(key.path, 'utf8');
  const errors: unknown[] = [];
  const attempt = (content: string, mode: number) => {
    const path = join(home, `k${errors.length}`);
    writeFileSync(path, content, { mode });
    try {
      loadLoginKey({ home, privateKeyPath: path });
    } catch (err) {
      errors.push(err);
    }
  };
  attempt(text.slice(0, Math.floor(text.length / 2)), 0o600);
  attempt(text.replace('OPENSSH PRIVATE', 'OPENSSH PUBLIC'), 0o600);
  attempt(text, 0o640);
  expect(errors).toHaveLength(3);
  for (const err of errors) {
    expect(err).toBeInstanceOf(BerthError);
    expectNoKey(JSON.stringify(toRunError(err)));
    expectNoKey(String((err as Error).stack));
  }
});
