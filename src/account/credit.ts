// The account's credit as read from users/current: used by the daemon's account watch and by the
// account checks of `berth doctor`.
import type { CurrentUser } from '../client/types.js';

/**
 * The account's credit, $: `credit`, the figure the official CLI shows as "Credit" (vast.py's user
 * fields). `balance` is another figure (a real record reads `balance: 0.0, credit: 17.5`), so it is
 * never read in its place: a fallback to it would hold every create for a zero that is not the
 * credit (issue #30, case 6). No `credit` is unknown (null), which holds nothing back.
 */
export function creditOf(user: CurrentUser): number | null {
  return typeof user.credit === 'number' && Number.isFinite(user.credit) ? user.credit : null;
}
