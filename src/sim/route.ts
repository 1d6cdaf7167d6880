// What a simulator route is: the shared router's fields (src/http/router.ts) plus how the service
// guards it (key, permission, rate-limit group) and its handler.
import type { RouteSpec } from '../http/router.js';
import type { RateGroup } from './config.js';
import type { Principal } from './auth.js';
import type { SimWorld } from './world.js';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface RouteContext {
  world: SimWorld;
  principal: Principal | undefined;
  params: Record<string, string>;
  query: URLSearchParams;
  body: unknown;
}

/** `drop`: the work is done but the answer is lost (the socket is destroyed). `text`: a plain-text answer. */
export type RouteResult = { status?: number; body: unknown } | { status: number; text: string } | { drop: true };

export interface Route extends RouteSpec {
  method: Method;
  /** e.g. `/api/v0/instances/{id}` (no trailing slash). */
  path: string;
  /** 'none': no key needed. */
  auth: 'key' | 'none';
  /** Permission category a user key needs. */
  category?: string;
  /**
   * Rate-limit group (its threshold); the limiter itself is per route and identity. Every API
   * route has one (the server refuses to start otherwise); admin routes have none.
   */
  group?: RateGroup;
  /**
   * The 429 body this endpoint documents: `detail` JSON, destroy's `{success, error, msg}`, or
   * plain text (the rate-limit page's "often plain text"; used where a yaml shows none).
   */
  limited?: 'detail' | 'success_error' | 'plain';
  /** A missing or bad key is 404 auth_error here (search_offers.yaml), not 401. */
  badKey404?: boolean;
  /** No key at all is 403 "This action requires login." (show_charges.yaml). */
  missingKey403?: boolean;
  /** The restricted instance key may call this route (the handler checks which instance). */
  instanceKey?: boolean;
  handler(ctx: RouteContext): RouteResult | Promise<RouteResult>;
}
