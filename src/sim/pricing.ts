// Money constants shared by search, create, the instance record and the ledger, so that an offer's
// `dph_total`, the instance's `dph_total` and what the ledger bills cannot drift apart.

/**
 * Hours in the month of `storage_cost` ($ per GB per month). show_instance.yaml's example is exact
 * with 720: storage_cost 0.14933… × disk 10 GB / 720 = diskHour 0.0020740740…, and dph_total
 * 1.0020740740… = dph_base 1.0 + that.
 */
export const HOURS_PER_MONTH = 720;

/** `allocated_storage` when a search leaves it out (search_offers.yaml: "Default is 8GB"). */
export const DEFAULT_ALLOCATED_GB = 8;

/** The documented minimum disk of a create (create_instance.yaml x-input-validation). */
export const MIN_DISK_GB = 8;

/** $/h of `gb` of disk at `storageCost` $/GB/month. */
export function diskDph(gb: number, storageCost: number): number {
  return (gb * storageCost) / HOURS_PER_MONTH;
}

export const round = (x: number, digits: number): number => Math.round(x * 10 ** digits) / 10 ** digits;
