// What the client reports instead of logging: the daemon subscribes with `onEvent` and decides what
// to say. Events carry ids, codes and timings only, never keys, env values or bodies.
import type { ErrorCode } from '../errors.js';
import type { RateGroup } from '../config/schema.js';
import type { GroupStats } from './limiter.js';

export type ClientOperation =
  | 'search'
  | 'create'
  | 'list'
  | 'show'
  | 'destroy'
  | 'destroy_bulk'
  | 'change'
  | 'change_bid'
  | 'recycle'
  | 'update_template'
  | 'request_logs'
  | 'current_user'
  | 'price_increases'
  | 'price_increase_accept'
  | 'price_increase_reject'
  | 'secrets'
  | 'template_delete'
  | 'webhook_rotate_secret'
  | 'api_key_create'
  | 'api_key_delete'
  | 'ssh_keys'
  | 'ssh_key_add'
  | 'ssh_key_attach'
  | 'charges'
  | 'cloud_connections'
  | 'cloud_copy';

export type ClientEvent =
  /** An attempt failed with a transient fault and will be tried again. */
  | { type: 'retry'; op: ClientOperation; group: RateGroup; attempt: number; code: ErrorCode; status?: number; message: string }
  /** A 429 paused the group. */
  | { type: 'rate_limited'; op: ClientOperation; group: RateGroup; pauseMs: number; threshold?: number; consecutive: number }
  /** One HTTP exchange ended: its status, or null when no answer came (network, timeout, abort). */
  | { type: 'response'; op: ClientOperation; group: RateGroup; status: number | null; ms: number }
  /** A paused group takes calls again. */
  | { type: 'resumed'; group: RateGroup }
  /**
   * Two bulk destroys in a row failed where destroys one by one then worked: this client destroys
   * one by one from now on (./bulk-destroy.ts). `code`, `status`: the last bulk failure's.
   */
  | { type: 'bulk_destroy_off'; code: ErrorCode; status?: number }
  /** A create's outcome is unknown: the caller must look for its label before anything else. */
  | { type: 'ambiguous_create'; offerId: number; label: string; code: ErrorCode }
  /**
   * An answer held records berth could not read: `dropped` were left out (the rest of the answer
   * was used), `repaired` instance records kept with their unreadable fields set to null. `issues`:
   * the first few, by path and expected type (never a value).
   */
  | { type: 'malformed_records'; op: ClientOperation; group: RateGroup; dropped: number; repaired: number; issues: string[] };

export interface ClientStats {
  /** Per endpoint group: calls scheduled and sent, 429s, pauses. */
  groups: Record<RateGroup, GroupStats>;
  /** Calls made through the client (not attempts). */
  calls: number;
  /** Attempts that were retried. */
  retries: number;
  /** 429 answers, all groups. */
  rateLimited: number;
  /** Creates reported ambiguous. */
  ambiguousCreates: number;
  /** This daemon's share of the account's rate limits (1 alone; 1/N among N daemons on one key). */
  rateShare: number;
}
