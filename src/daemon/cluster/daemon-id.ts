// A daemon's id on a shared store: its leases' owner. Kept in BERTH_HOME, so that a restarted daemon
// is the same daemon and takes its own runs back at once instead of waiting for its leases to end
// (the home's lock makes sure no other process on this machine is that daemon meanwhile).
//
// A home copied with its `daemon-id` (a cloned machine image, a home restored from a backup while
// its original still runs) would make two live daemons one lease owner: both would own every run,
// both take the whole rate share, and fencing could not tell them apart. So each process claims its
// id in the store before it acts (`claimDaemonId`): a lease row `~id:ID` held by this process's
// incarnation (host, boot, pid, a nonce), renewed with its other leases. A claim held by another
// incarnation is waited out for a lease and a second (a predecessor that died ends it; one that
// died on this very machine is known dead at once by its pid); a claim still renewed after that is a
// live twin's, and this daemon takes a new id, kept in its home, and says so.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';

const ID = /^[A-Za-z0-9._-]{1,80}$/;

function newId(): string {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9.-]/g, '-')
      .slice(0, 40) || 'host';
  return `${host}-${randomBytes(4).toString('hex')}`;
}

function daemonId(home: string): string {
  const file = join(home, 'daemon-id');
  try {
    const id = readFileSync(file, 'utf8').trim();
    if (ID.test(id)) return id;
  } catch {
    // none yet: made below
  }
  const id = newId();
  writeFileSync(file, `${id}\n`, { mode: 0o600 });
  return id;
}

/** The row that says which process is daemon `id` now. */
export const idClaimRow = (id: string) => `~id:${id}`;

/** This machine's boot (Linux), so that a pid is only compared within one boot. */
function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** This process, as the holder of its id's claim: `host|boot|pid|nonce`. */
export function incarnation(): string {
  return [hostname(), bootId(), String(process.pid), randomBytes(6).toString('hex')].join('|');
}

/** True when `holder` is a process of this machine's current boot that is gone. */
function deadHere(holder: string): boolean {
  const [host, boot, pid] = holder.split('|');
  if (host !== hostname() || boot !== bootId() || !boot || Number(pid) === process.pid) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

export interface ClaimDeps {
  home: string;
  store: Pick<Store, 'leases'>;
  clock: Clock;
  log: Logger;
  leaseMs: number;
  /** This process (`incarnation()`). */
  self: string;
  signal?: AbortSignal;
}

/** The id this daemon is on the store, claimed for this process (see the top of the file). */
export async function claimDaemonId(deps: ClaimDeps): Promise<string> {
  const { store, clock, log, leaseMs, self } = deps;
  const id = daemonId(deps.home);
  const row = idClaimRow(id);
  const giveUpAt = clock.monotonic() + leaseMs + 1000;
  for (;;) {
    if (store.leases.acquire(row, self, store.leases.serverNow(), leaseMs)) return id;
    const holder = store.leases.get(row)?.owner;
    if (holder !== undefined && deadHere(holder)) {
      store.leases.release(row, holder);
      continue;
    }
    if (clock.monotonic() >= giveUpAt) break;
    await clock.sleep(500, deps.signal);
  }
  const fresh = newId();
  writeFileSync(join(deps.home, 'daemon-id'), `${fresh}\n`, { mode: 0o600 });
  log.warn(
    { was: id, now: fresh },
    `the daemon id ${id} (BERTH_HOME/daemon-id) is another live daemon's: this home was copied (a cloned image, a restored backup). This daemon is ${fresh} from now on`,
  );
  return claimDaemonId(deps);
}
