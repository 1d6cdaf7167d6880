// berth ssh's host pins (issue #49 item 5): the first key seen for an instance is pinned, the same
// key passes again, another is refused, and each instance has its own pin in a file only its owner reads.
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostPinsFile } from '../../../src/ssh/host-pins.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function pinsPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-pins-'));
  dirs.push(dir);
  return join(dir, 'ssh', 'host_pins.json');
}

describe('host pins', () => {
  it('pins the first key of an instance, takes it again, and refuses another, even read afresh from the file', () => {
    const path = pinsPath();
    expect(hostPinsFile(path).verify(7, 'SHA256:first')).toBe(true);
    expect(hostPinsFile(path).verify(7, 'SHA256:first')).toBe(true);
    expect(hostPinsFile(path).verify(7, 'SHA256:changed')).toBe(false);
    // A refusal pins nothing new.
    expect(hostPinsFile(path).verify(7, 'SHA256:first')).toBe(true);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual({ '7': 'SHA256:first' });
  });

  it('keeps one pin per instance (an address and port are reused by other instances), in a 0600 file', () => {
    const path = pinsPath();
    const pins = hostPinsFile(path);
    expect(pins.verify(1, 'SHA256:a')).toBe(true);
    expect(pins.verify(2, 'SHA256:b')).toBe(true);
    expect(pins.verify(1, 'SHA256:b')).toBe(false);
    expect(pins.verify(2, 'SHA256:a')).toBe(false);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });
});
