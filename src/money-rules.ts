// When a figure in dollars passes a limit: every cap and budget berth holds a run or the daemon to
// (max_price_per_hour, budget_usd, budget.max_usd_per_hour and max_usd_per_day) is compared here,
// with one tolerance, so the search, the create gate, the money guard, the price-increase answer
// and the run machine can never disagree on a price that sits at its cap. Free of imports: the run
// machine, the job spec and the daemon's money room all read it.

/**
 * How far past a limit a figure may sit and still count as at it: a millionth of a dollar (or of a
 * dollar an hour). Prices are floats from JSON, and the service states them to about 6 decimals
 * (search_offers.yaml: dph_total 0.234567, min_bid 0.111111; the simulator rounds a host's new
 * price to 1e-6), while berth derives others (disk from storage_cost / 720, a price after an
 * increase) in full float. An instance rented at its cap may therefore be listed a few 1e-7 above
 * the figure berth computed for it, which is not a host raising the price. Far above float noise
 * (1e-16 relative) and far below anything billed (the service rounds a contract's charges to 1e-3).
 */
export const MONEY_TOLERANCE_USD = 1e-6;

/**
 * `amount` passes `cap` by more than the tolerance: a $/h price against a $/h cap, or dollars
 * against dollars (the last 24 h's spend against max_usd_per_day, a boot's cost against what is
 * left of a budget). At the cap is within it.
 */
export function overCap(amount: number, cap: number): boolean {
  return amount > cap + MONEY_TOLERANCE_USD;
}

/**
 * `spentUsd` has reached `budgetUsd` (a run's budget_usd, or the share of it a run is warned at), to
 * within the tolerance: a timer set to the moment it is spent lands on it, and floating point may
 * fall short of it by a hair.
 */
export function reachedBudget(spentUsd: number, budgetUsd: number): boolean {
  return spentUsd >= budgetUsd - MONEY_TOLERANCE_USD;
}
