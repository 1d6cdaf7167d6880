// `berth status | head -3`: a reader that closes the pipe early ends the CLI quietly with exit 0,
// not with an unhandled EPIPE and a stack trace (the CLI's own writer, as every command uses it).
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { packagePath } from '../../src/package-path.js';

describe('a pipe closed by its reader', () => {
  it('ends the writer quietly with exit 0', async () => {
    const io = packagePath('dist', 'src', 'cli', 'io.js');
    // Far more than a pipe buffer, line by line, as a long `berth events` or `berth status` writes.
    const writer = `import(${JSON.stringify(io)}).then(({ processIo }) => { const io = processIo(); for (let i = 0; i < 200000; i++) io.out('line ' + i); })`;
    const proc = spawn(process.execPath, ['-e', writer], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    // Read the first chunk, then hang up, as `head` does.
    proc.stdout.once('data', () => proc.stdout.destroy());
    const code = await new Promise<number | null>((resolve) => proc.on('close', (c) => resolve(c)));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});
