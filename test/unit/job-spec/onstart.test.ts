import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SpecError } from '../../../src/errors.js';
import { ONSTART_MAX_CHARS, encodeOnstart, onstartFits } from '../../../src/job-spec/onstart.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Runs `onstart` as a container would: the shell reads it as a script, in a scratch directory. */
function run(shell: string, onstart: string, stdin = '') {
  const dir = mkdtempSync(join(tmpdir(), 'berth-onstart-'));
  dirs.push(dir);
  const stdout = execFileSync(shell, ['-c', onstart], {
    cwd: dir,
    // HOME points at the scratch directory so that no rc file of this machine runs.
    env: { PATH: process.env['PATH'], HOME: dir, TMPDIR: dir },
    input: stdin,
  });
  return { dir, stdout: stdout.toString('utf8') };
}

/** A script of more than 5,000 characters (non-ASCII included) that writes every line to out.txt. */
function longScript(): { script: string; expected: string } {
  const lines = Array.from({ length: 120 }, (_, i) => `line ${String(i).padStart(3, '0')} of the café ✓ marker text`);
  const script = [
    '#!/bin/sh',
    'set -e',
    ...lines.map((l) => `echo '${l}' >> out.txt`),
    'read -r greeting',
    'echo "stdin: $greeting"',
    '',
  ].join('\n');
  return { script, expected: lines.map((l) => `${l}\n`).join('') };
}

describe('encodeOnstart', () => {
  it('sends a script within the limit unchanged', () => {
    const script = 'echo hello > out.txt';
    expect(encodeOnstart(script)).toBe(script);
    const exact = `#${'x'.repeat(ONSTART_MAX_CHARS - 1)}`;
    expect(encodeOnstart(exact)).toBe(exact);
    const { dir } = run('sh', encodeOnstart(script));
    expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe('hello\n');
  });

  it.each(['sh', 'bash'])('wraps a 5,000-character script so that %s runs it verbatim', (shell) => {
    const { script, expected } = longScript();
    expect(script.length).toBeGreaterThan(5000);
    const wrapper = encodeOnstart(script);
    expect(wrapper.length).toBeLessThanOrEqual(ONSTART_MAX_CHARS);
    expect(wrapper).toMatch(/^echo '[A-Za-z0-9+/=]+' \| base64 -d \| gunzip -c > /);

    const { dir, stdout } = run(shell, wrapper, 'hello from stdin\n');
    expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe(expected);
    // The script's stdin is the instance's, not the pipe that carried the script.
    expect(stdout).toBe('stdin: hello from stdin\n');
    // The decoded copy is byte for byte what the user wrote.
    const copy = readdirSync(dir).find((f) => f.startsWith('berth-onstart.'))!;
    expect(readFileSync(join(dir, copy), 'utf8')).toBe(script);
  });

  it('runs the original in the shell that runs the wrapper', () => {
    // `[[ ]]` is bash syntax: it works only because the decoded script is sourced, not re-executed by sh.
    const script = `${'# padding\n'.repeat(500)}if [[ -n "$BASH_VERSION" ]]; then echo bash; fi\n`;
    expect(run('bash', encodeOnstart(script)).stdout).toBe('bash\n');
  });

  it('refuses a script too large even when compressed', () => {
    let script = '';
    while (script.length < 20_000) script += Math.random().toString(36).slice(2);
    expect(onstartFits(script)).toBe(false);
    expect(() => encodeOnstart(script)).toThrow(SpecError);
  });
});
