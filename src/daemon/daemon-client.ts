// The daemon's marketplace client and its metrics, a step of the composition root (./daemon.ts),
// built together because each needs the other: the metrics read the client's call counts, and
// every event of the client is logged and counted. Daemons sharing a store share the key's limits
// through the store (SharedPace): each call also waits for the group's next moment free of every
// daemon's calls, and a 429 pauses the group for all of them.
import { createMarketClient, type MarketplaceClient } from '../client/marketplace-client.js';
import type { ClientEvent } from '../client/events.js';
import type { Clock } from '../clock.js';
import type { Config, RateGroup } from '../config/schema.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import type { LeaseOwner } from './cluster/lease-owner.js';
import { SharedPace } from './cluster/shared-pace.js';
import { DaemonMetrics, type ClusterState } from './notify/metrics.js';

export interface DaemonClientDeps {
  config: Config;
  apiKey: string;
  store: Store;
  clock: Clock;
  log: Logger;
  /** Several daemons on one store: this daemon's lease (the pace is shared through the store). */
  owner: LeaseOwner | undefined;
  /** Several daemons on one store: this daemon's part, for /metrics. */
  clusterState: (() => ClusterState) | undefined;
}

export function daemonClient(deps: DaemonClientDeps): { client: MarketplaceClient; metrics: DaemonMetrics } {
  const { config, store, clock, log, owner, clusterState } = deps;
  const metrics = new DaemonMetrics({
    store,
    clock,
    clientStats: () => client.stats(),
    ...(clusterState ? { cluster: clusterState } : {}),
  });
  const pace = owner ? new SharedPace({ store, owner, clock, log, rateLimits: config.rate_limits }) : undefined;
  const client = createMarketClient({
    baseUrl: config.service.base_url,
    apiKey: deps.apiKey,
    config,
    clock,
    ...(pace ? { pace: (group: RateGroup, signal?: AbortSignal) => pace.wait(group, signal) } : {}),
    onEvent: (e) => {
      // A 429 pauses the group for every daemon sharing the key, not only this one.
      if (e.type === 'rate_limited') pace?.hold(e.group, e.pauseMs);
      logClientEvent(log, e);
      metrics.clientEvent(e);
    },
  });
  return { client, metrics };
}

function logClientEvent(log: Logger, e: ClientEvent): void {
  switch (e.type) {
    case 'retry':
      log.debug({ clientEvent: e }, `retrying ${e.op} after ${e.code}`);
      break;
    case 'rate_limited':
      log.warn({ clientEvent: e }, `rate limited on ${e.group}; pausing ${e.pauseMs} ms`);
      break;
    case 'ambiguous_create':
      log.warn({ clientEvent: e }, 'a create has an unknown outcome; looking for its label');
      break;
    case 'bulk_destroy_off':
      log.warn(
        { clientEvent: e },
        `bulk destroys failed twice in a row (${e.code}) where one-by-one destroys worked; destroying one by one from now on`,
      );
      break;
    case 'resumed':
      log.debug({ clientEvent: e }, `${e.group} calls resume`);
      break;
    case 'malformed_records': {
      const what = [
        e.dropped > 0 ? `left out ${e.dropped}` : '',
        e.repaired > 0 ? `kept ${e.repaired} with unreadable fields set to null` : '',
      ]
        .filter(Boolean)
        .join(', ');
      log.warn(
        { clientEvent: e },
        `the service's answer to ${e.op} held records berth cannot read: ${what}; the rest of the answer is used`,
      );
      break;
    }
  }
}
