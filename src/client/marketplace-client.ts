// The marketplace client: every endpoint berth uses, each call going through the one retry loop of
// ./service-call.ts. Built here from its parts, one file per concern: offers (search, create),
// one instance (show, change, logs, destroy), the instance list, price increases, the account's
// reads and its setup objects (keys, webhook secret, templates).
//
// The client does not log; it reports retries and pauses through `onEvent`.
import type { Clock } from '../clock.js';
import type { Config, RateGroup } from '../config/schema.js';
import { accountCalls } from './account-calls.js';
import { accountSetupCalls } from './account-setup-calls.js';
import { cloudCalls } from './cloud-calls.js';
import { sshKeyCalls } from './ssh-key-calls.js';
import type { ClientEvent } from './events.js';
import { createHttp } from './http.js';
import { instanceCalls } from './instance-calls.js';
import { instanceListCalls } from './instance-list.js';
import { createLimiter } from './limiter.js';
import { offerCalls } from './offer-calls.js';
import { priceIncreaseCalls } from './price-increase-calls.js';
import { createServiceCaller } from './service-call.js';
import type { MarketplaceClient } from './types.js';

export type { Charge, MarketplaceClient } from './types.js';
export { INSTANCE_COLUMNS } from './instance-list.js';

export interface MarketClientOptions {
  baseUrl: string;
  apiKey: string;
  config: Pick<Config, 'service' | 'rate_limits' | 'retry'>;
  onEvent?: (event: ClientEvent) => void;
  /** Retries per call at most (the time budget `retry.max_retry_time_s` usually ends it first); default 10. */
  maxRetries?: number;
  /** Time for the rate limiter; default the wall clock. */
  clock?: Clock;
  /**
   * Called once this client's limiter lets a call go, before it is sent: resolves when the call may
   * go as far as the other daemons sharing the key are concerned (src/daemon/cluster/shared-pace.ts).
   */
  pace?: (group: RateGroup, signal?: AbortSignal) => Promise<void>;
}

export function createMarketClient(options: MarketClientOptions): MarketplaceClient {
  const { config, apiKey } = options;
  const emit = (e: ClientEvent) => {
    try {
      options.onEvent?.(e);
    } catch {
      // A listener's fault must not change the outcome of a service call.
    }
  };
  const http = createHttp({
    baseUrl: options.baseUrl,
    apiKey,
    connectTimeoutMs: config.service.connect_timeout_s * 1000,
    timeoutMs: config.service.timeout_s * 1000,
  });
  const limiter = createLimiter(config.rate_limits, {
    ...(options.clock ? { clock: options.clock } : {}),
    maxPauseMs: config.retry.max_delay_s * 1000,
    onResume: (group) => emit({ type: 'resumed', group }),
  });
  const caller = createServiceCaller({
    http,
    limiter,
    apiKey,
    retry: config.retry,
    maxRetries: options.maxRetries,
    emit,
    pace: options.pace,
  });

  return {
    ...offerCalls(caller),
    ...instanceCalls(caller),
    ...instanceListCalls(caller),
    ...priceIncreaseCalls(caller),
    ...accountCalls(caller),
    ...accountSetupCalls(caller),
    ...sshKeyCalls(caller),
    ...cloudCalls(caller),

    stats() {
      return { groups: limiter.stats(), ...caller.counters, rateShare: limiter.share() };
    },
    setRateShare(fraction, overrides) {
      limiter.setShare(fraction, overrides);
    },
    async close() {
      await limiter.close();
      await http.close();
    },
  };
}
