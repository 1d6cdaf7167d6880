// A store belongs to one service and one account. Its runs' instances bill on the account whose key
// created them, at the service that key was sent to; a daemon pointed at another service or account
// cannot see them, would take them for lost and rent replacements while they go on billing (issue
// #41). So the store records both at first use (meta `service_binding`: the base URL at once, the
// account's id once `GET /api/v0/users/current/` answers with it, show_user.yaml: `{id, key_id,
// email, balance, ...}`), and a start checks them against what it is pointed at:
// - the same service and account, or nothing recorded yet: it records and goes on;
// - another one, with no live run in the store: nothing of the old one can bill through berth, so it
//   rebinds and says so in the log;
// - another one while runs are live: it refuses to start (a ConfigError: exit 2), naming both and the
//   two ways out. The base URL is checked before anything starts; the account needs a call, so the
//   runs wait for its answer before they resume (`confirmAccount`), and nothing is rented before.
//
// Live runs are counted when the daemon starts: a run submitted while the account is being read
// rents on the account the daemon is pointed at, which is the one it then records.
import type { Clock } from '../clock.js';
import { countText } from '../count-text.js';
import type { CurrentUser } from '../client/types.js';
import { BerthError, ConfigError, toRunError } from '../errors.js';
import type { Logger } from '../logger.js';
import { whileStoreBusy } from './store-wait.js';
import type { ServiceBinding, Store } from '../store/index.js';

/** How long a start waits before reading users/current again after a transient failure, ms. */
const REREAD_MS = 5_000;

/** A base URL as the binding compares it: no user info, no query, no trailing slash. */
function bindingUrl(baseUrl: string): string {
  const u = new URL(baseUrl);
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`;
}

const WAYS_OUT =
  'To use that one, start this daemon with another BERTH_HOME, or first end those runs (`berth cancel RUN`) with the daemon pointed where they run.';

function refusal(live: number, recorded: string, now: string, field: string): ConfigError {
  return new ConfigError(
    `This store's ${countText(live, 'live run rents', 'live runs rent')} on ${recorded}, but ${now}: this daemon would take their instances for lost and rent again while they bill. ${WAYS_OUT}`,
    field,
  );
}

/** What a start found of the store's binding, handed from `checkServiceUrl` to `confirmAccount`. */
export interface BindingAtStart {
  baseUrl: string;
  /** The account the store's live runs rent on, to confirm before they resume; null when there is none to confirm. */
  confirm: number | null;
  live: number;
}

/**
 * At start, before anything else: refuses another service while runs are live, records this one
 * otherwise. Throws ConfigError (exit 2).
 */
export function checkServiceUrl(store: Pick<Store, 'binding' | 'runs'>, baseUrl: string, now: number, log: Logger): BindingAtStart {
  const url = bindingUrl(baseUrl);
  const recorded = store.binding.load();
  const live = store.runs.live().length;
  if (recorded && recorded.base_url !== url) {
    if (live > 0) throw refusal(live, recorded.base_url, `this daemon is pointed at ${url}`, 'service.base_url');
    log.warn(
      { was: recorded.base_url, now: url },
      `this store rented on ${recorded.base_url} before; it has no live run, so it now rents on ${url}`,
    );
  }
  if (!recorded || recorded.base_url !== url) {
    store.binding.save({ base_url: url, account_id: null, at: now });
    return { baseUrl: url, confirm: null, live };
  }
  return { baseUrl: url, confirm: live > 0 ? recorded.account_id : null, live };
}

export interface ConfirmDeps {
  store: Pick<Store, 'binding'>;
  currentUser: (options: { signal: AbortSignal }) => Promise<CurrentUser>;
  clock: Clock;
  log: Logger;
  signal: AbortSignal;
}

/**
 * Reads the account the key belongs to and records it; with live runs on another account, rejects
 * with a ConfigError (exit 2). A transient failure is read again until it answers (or the daemon
 * stops); a rejected key resolves (no call can rent with it, and the runs meet the refusal
 * themselves); any other failure rejects, since the account cannot be confirmed.
 */
export async function confirmAccount(at: BindingAtStart, deps: ConfirmDeps): Promise<void> {
  const { clock, log, signal } = deps;
  let user: CurrentUser;
  for (;;) {
    try {
      user = await deps.currentUser({ signal });
      break;
    } catch (err) {
      if (err instanceof BerthError && err.code === 'aborted') throw err;
      if (err instanceof BerthError && err.code === 'auth') return;
      if (!(err instanceof BerthError && err.retryable)) throw err;
      log.warn(
        { err: toRunError(err) },
        at.confirm === null
          ? 'could not read which account the API key belongs to; trying again'
          : 'could not read which account the API key belongs to; the runs resume once it answers',
      );
      await clock.sleep(REREAD_MS, signal);
    }
  }
  const id = typeof user.id === 'number' ? user.id : null;
  if (id === null) return;
  if (at.confirm !== null && id !== at.confirm) {
    throw refusal(at.live, `account #${at.confirm} at ${at.baseUrl}`, `the API key is account #${id}'s`, 'service.api_key_file');
  }
  // A store that does not answer now (a Postgres server restarting, berth.db locked) is waited out:
  // seen in chaos-pg (seed 184132459), a daemon whose store went away just after the account read
  // exited 2 here.
  await whileStoreBusy(
    'record the account',
    () => {
      const recorded = deps.store.binding.load();
      if (recorded && recorded.account_id !== null && recorded.account_id !== id) {
        log.warn(
          { was: recorded.account_id, now: id },
          `this store rented on account #${recorded.account_id} before; it had no live run, so it now rents on account #${id}`,
        );
      }
      if (recorded?.account_id !== id)
        deps.store.binding.save({ base_url: at.baseUrl, account_id: id, at: clock.now() } satisfies ServiceBinding);
    },
    { clock, log, signal },
  );
}
