// The account's credit as read from users/current: used by the daemon's account watch and by the
// account checks of `berth doctor`.
import type { CurrentUser } from '../client/types.js';

/**
 * The account's credit, $. The seed calls `credit` the account balance; show_user.yaml documents
 * `balance`. berth reads `credit` and falls back to `balance` when the service sends no `credit`.
 */
export function creditOf(user: CurrentUser): number | null {
  if (typeof user.credit === 'number' && Number.isFinite(user.credit)) return user.credit;
  const balance = user['balance'];
  return typeof balance === 'number' && Number.isFinite(balance) ? balance : null;
}
