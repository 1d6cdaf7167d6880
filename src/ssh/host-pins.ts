// Host keys pinned on disk for `berth ssh`, one per instance, at the first login (as OpenSSH's
// known_hosts, but per instance: an instance's address and port are reused by the next renter's,
// and its proxy port by other instances). A changed key is refused. The daemon keeps its own pins.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export interface HostPins {
  /** True when `fingerprint` is the one pinned for `instanceId`, or none was (it is pinned now). */
  verify(instanceId: number, fingerprint: string): boolean;
}

export function hostPinsFile(path: string): HostPins {
  const read = (): Record<string, string> => {
    try {
      const parsed = JSON.parse(readFileSync(path, 'utf8')) as unknown;
      return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, string>) : {};
    } catch {
      return {};
    }
  };
  return {
    verify(instanceId, fingerprint) {
      const pins = read();
      const pinned = pins[String(instanceId)];
      if (pinned !== undefined) return pinned === fingerprint;
      pins[String(instanceId)] = fingerprint;
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
      writeFileSync(tmp, `${JSON.stringify(pins, null, 2)}\n`, { mode: 0o600 });
      renameSync(tmp, path);
      return true;
    },
  };
}
