// The daemon's listeners, opened by the composition root (./daemon.ts) before any run resumes, so
// that status works and submits are stored from the start: the control API (loopback), the
// readiness callback (facing the instances, when readiness.callback_url is set) and the service's
// signed webhooks (when webhooks.listen is set); then daemon.json says where the control API is.
// Each pushes its releaser: no new connections, and the open ones cut.
import { rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import type { Config } from '../config/schema.js';
import { ConfigError, StoreError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Releasers } from '../releasers.js';
import type { Store } from '../store/index.js';
import { createControlApi, listen, type ControlApiDeps } from './control/control-api.js';
import { createReadyCallbackServer } from './inbound/ready-callback.js';
import type { ReadyTokens } from './inbound/ready-token.js';
import { createWebhookReceiver } from './inbound/webhook-receiver.js';
import type { AccountWatch } from './money/account-watch.js';
import type { Supervisor } from './runs/supervisor.js';

export interface ListenersDeps {
  config: Config;
  /** BERTH_HOME: daemon.json is written there. */
  home: string;
  /** The webhooks' signing secret (set whenever webhooks.listen is: the config says so). */
  webhookSecret: string | undefined;
  store: Store;
  clock: Clock;
  log: Logger;
  /** What the control API serves, wired by ./daemon.ts. */
  controlApi: ControlApiDeps;
  /** Set when readiness.callback_url is: its listener checks the tokens. */
  readyCallback: { url: string; tokens: ReadyTokens } | undefined;
  /** The runs a readiness callback or a webhook speaks of. */
  supervisor: Pick<Supervisor, 'ready' | 'serviceSays'>;
  /** A low-credit webhook reads the credit at once. */
  account: Pick<AccountWatch, 'lowCredit'>;
}

/** Where the daemon listens. */
export interface Listening {
  url: string;
  callbackListen?: string;
  webhookUrl?: string;
}

export async function openListeners(deps: ListenersDeps, releasers: Releasers): Promise<Listening> {
  const { config, store, clock, log, readyCallback, supervisor } = deps;
  const { streams } = deps.controlApi;
  const server = createControlApi(deps.controlApi);
  let url: string;
  try {
    url = await listen(server, config.daemon.listen);
  } catch (err) {
    throw new ConfigError(`Cannot listen on ${config.daemon.listen}: ${(err as Error).message}`, 'daemon.listen', err);
  }
  releasers.push(() => {
    // Event streams end cleanly before the connections are cut.
    streams.closeAll();
    server.close();
    server.closeAllConnections();
  });
  // The callback listener faces the instances (readiness.callback_url leads to it), so it is a
  // server of its own, apart from the loopback-only control API.
  let callbackListen: string | undefined;
  if (readyCallback) {
    const callbackServer = createReadyCallbackServer({
      tokens: readyCallback.tokens,
      ready: (runId, n) => supervisor.ready(runId, n),
      log,
    });
    try {
      callbackListen = await listen(callbackServer, config.readiness.callback_listen);
    } catch (err) {
      throw new ConfigError(
        `Cannot listen on ${config.readiness.callback_listen} for the readiness callback: ${(err as Error).message}`,
        'readiness.callback_listen',
        err,
      );
    }
    // An open listener would keep the process alive, neither serving nor exiting.
    releasers.push(() => closeServer(callbackServer));
    log.info({ listen: callbackListen, url: readyCallback.url }, 'readiness callback listening');
  }
  writeDaemonFile(deps.home, url, releasers);
  let webhookUrl: string | undefined;
  if (config.webhooks.listen) {
    const webhooks = createWebhookReceiver({
      secret: deps.webhookSecret!,
      toleranceS: config.webhooks.tolerance_s,
      store,
      clock,
      log,
      onLowCredit: () => deps.account.lowCredit(),
      onOutbid: (n) => supervisor.serviceSays(n.instanceId, 'stopped', n.at, n.why, n.eventId),
      onInstanceOffline: (n) => supervisor.serviceSays(n.instanceId, 'offline', n.at, n.why, n.eventId),
    });
    try {
      webhookUrl = await listen(webhooks, config.webhooks.listen);
    } catch (err) {
      throw new ConfigError(`Cannot listen for webhooks on ${config.webhooks.listen}: ${(err as Error).message}`, 'webhooks.listen', err);
    }
    releasers.push(() => closeServer(webhooks));
    log.info({ url: webhookUrl }, "listening for the service's signed webhooks");
  }
  return { url, ...(callbackListen ? { callbackListen } : {}), ...(webhookUrl ? { webhookUrl } : {}) };
}

/** daemon.json: where the CLI finds the control API; removed on stop, and however the process ends. */
function writeDaemonFile(home: string, url: string, releasers: Releasers): void {
  const daemonFile = join(home, 'daemon.json');
  const removeDaemonFile = () => rmSync(daemonFile, { force: true });
  try {
    writeFileSync(daemonFile, JSON.stringify({ url, pid: process.pid }), { mode: 0o600 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new StoreError(`Cannot write ${daemonFile} (${code}): check that the disk is not full and BERTH_HOME is writable.`, err);
  }
  // However the process ends (an uncaught error, a second signal's process.exit), daemon.json goes with it.
  process.on('exit', removeDaemonFile);
  releasers.push(() => {
    removeDaemonFile();
    process.off('exit', removeDaemonFile);
  });
}

/** A listener's releaser: no new connections, and the open ones cut. */
function closeServer(server: Server): void {
  server.close();
  server.closeAllConnections();
}
