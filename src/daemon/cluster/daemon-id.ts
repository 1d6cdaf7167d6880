// A daemon's id on a shared store: its leases' owner. Kept in BERTH_HOME, so that a restarted daemon
// is the same daemon and takes its own runs back at once instead of waiting for its leases to end
// (the home's lock makes sure no other process is that daemon meanwhile).
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

const ID = /^[A-Za-z0-9._-]{1,80}$/;

export function daemonId(home: string): string {
  const file = join(home, 'daemon-id');
  try {
    const id = readFileSync(file, 'utf8').trim();
    if (ID.test(id)) return id;
  } catch {
    // none yet: made below
  }
  const host =
    hostname()
      .replace(/[^A-Za-z0-9.-]/g, '-')
      .slice(0, 40) || 'host';
  const id = `${host}-${randomBytes(4).toString('hex')}`;
  writeFileSync(file, `${id}\n`, { mode: 0o600 });
  return id;
}
