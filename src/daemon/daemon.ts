// The daemon: config → lock and migrate the store → reconcile with the service's instance list →
// resume every run → serve the control API, with one shared poller. `stop()` is the graceful
// shutdown: no new work, in-flight calls abandoned safely (their journal rows let the next start
// reconcile), store flushed and closed.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createMarketClient } from '../client/marketplace-client.js';
import type { ClientEvent } from '../client/events.js';
import { systemClock } from '../clock.js';
import { loadConfig, type DeepPartial } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { ConfigError, describeError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import { openStore } from '../store/index.js';
import { createControlApi, listen } from './control-api.js';
import { InstancePoller, type InstanceLists } from './poller.js';
import { Supervisor } from './supervisor.js';

export interface DaemonOptions {
  configFile?: string;
  listen?: string;
  pretty?: boolean;
  env?: NodeJS.ProcessEnv;
  overrides?: DeepPartial<Config>;
  logger?: Logger;
}

export interface RunningDaemon {
  url: string;
  token: string;
  home: string;
  storeId: string;
  supervisor: Supervisor;
  stop(): Promise<void>;
}

/** The control token: made once per BERTH_HOME, readable by its owner only. */
function ensureControlToken(home: string): string {
  const path = join(home, 'control.token');
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  const token = randomBytes(24).toString('base64url');
  writeFileSync(path, token, { mode: 0o600 });
  return token;
}

function logClientEvent(log: Logger, e: ClientEvent): void {
  switch (e.type) {
    case 'retry':
      log.debug({ clientEvent: e }, `retrying ${e.op} after ${e.code}`);
      break;
    case 'rate_limited':
      log.warn({ clientEvent: e }, `rate limited on ${e.group}; pausing ${e.pauseMs} ms`);
      break;
    case 'fallback':
      log.warn({ clientEvent: e }, 'the v0 instance list is deprecated; using the v1 list');
      break;
    case 'ambiguous_create':
      log.warn({ clientEvent: e }, 'a create has an unknown outcome; looking for its label');
      break;
    case 'resumed':
      log.debug({ clientEvent: e }, `${e.group} calls resume`);
      break;
  }
}

export async function startDaemon(options: DaemonOptions = {}): Promise<RunningDaemon> {
  const { config, env } = loadConfig(
    { configFile: options.configFile, listen: options.listen, overrides: options.overrides },
    options.env ?? process.env,
  );
  if (!env.apiKey) {
    throw new ConfigError('No marketplace API key: set BERTH_API_KEY, or BERTH_API_KEY_FILE / service.api_key_file to a file holding it.', 'service.api_key_file');
  }
  const log = options.logger ?? createLogger({ pretty: options.pretty });
  const store = openStore({ home: env.home, lock: true });
  const startedAt = Date.now();
  log.info({ home: env.home, storeId: store.storeId, baseUrl: config.service.base_url }, 'berth daemon starting');
  const listEveryS = 1 / config.rate_limits.list.per_s;
  if (config.polling.interval_s < listEveryS) {
    log.warn(
      { interval_s: config.polling.interval_s, list_per_s: config.rate_limits.list.per_s },
      `polling.interval_s is shorter than rate_limits.list allows: instance lists will be ${listEveryS} s apart, not ${config.polling.interval_s} s`,
    );
  }

  const client = createMarketClient({
    baseUrl: config.service.base_url,
    apiKey: env.apiKey,
    config,
    onEvent: (e) => logClientEvent(log, e),
  });
  // The supervisor's runs get their lists from the poller, and the poller feeds the supervisor.
  const lists: InstanceLists = { next: (after, signal) => poller.next(after, signal) };
  const supervisor: Supervisor = new Supervisor({ store, client, clock: systemClock, lists, config, log });
  const poller: InstancePoller = new InstancePoller({
    client,
    intervalMs: config.polling.interval_s * 1000,
    log,
    onList: (instances, listedAt) => supervisor.onList(instances, listedAt),
  });

  // Reconcile before resuming: adopt instances whose create was journaled, destroy orphans. If the
  // service cannot be reached now, the poller's sweep does the same as soon as it can.
  try {
    await poller.pollOnce();
  } catch (err) {
    log.warn({ err: describeError(err) }, 'could not list instances at start; reconciling on the next poll');
  }
  supervisor.resumeAll();
  poller.start();

  const token = ensureControlToken(env.home);
  const server = createControlApi({ store, supervisor, token, log, startedAt });
  let url: string;
  try {
    url = await listen(server, config.daemon.listen);
  } catch (err) {
    await poller.stop();
    supervisor.stop();
    await client.close();
    store.close();
    throw new ConfigError(`Cannot listen on ${config.daemon.listen}: ${(err as Error).message}`, 'daemon.listen', err);
  }
  const daemonFile = join(env.home, 'daemon.json');
  writeFileSync(daemonFile, JSON.stringify({ url, pid: process.pid }), { mode: 0o600 });
  log.info({ url, resumed: supervisor.liveCount }, 'berth daemon ready');

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      log.info('berth daemon stopping');
      server.close();
      server.closeAllConnections();
      await poller.stop();
      supervisor.stop();
      await client.close().catch(() => undefined);
      rmSync(daemonFile, { force: true });
      store.close();
      log.info('berth daemon stopped');
      log.flush?.();
    })());

  return { url, token, home: env.home, storeId: store.storeId, supervisor, stop };
}
