// `berth doctor [--config FILE] [--json]`: the account checks (src/account/account-checks.ts), one
// line per check, against the service the daemon would use, with the key it would use. Exit 0 when
// every check passes, 4 when the key is rejected or lacks a permission, 1 for any other failure.
// A terminal that has no key of its own but finds the daemon (only BERTH_HOME set, as in the
// tutorial's third terminal) asks the daemon to run the same checks with its key
// (GET /v1/account/checks): the key never has to be in every terminal.
import { createMarketClient } from '../../client/marketplace-client.js';
import { berthHome } from '../../config/home.js';
import { loadConfig } from '../../config/load.js';
import { loadLoginKey } from '../../ssh/key-pair.js';
import { checkAccount, checkLines } from '../../account/account-checks.js';
import { BerthError, ConfigError } from '../../errors.js';
import type { AccountChecks } from '../../wire/control-api.js';
import { connectToDaemon, type ControlClient } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { printJson, type Io } from '../io.js';

export async function doctorCommand(options: { config?: string; json?: boolean }, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const { config, env: loaded } = loadConfig({ configFile: options.config }, env);
  if (!loaded.apiKey) {
    const viaDaemon = await daemonChecks(env);
    if (viaDaemon) return printDaemonChecks(viaDaemon, options, io);
    throw new ConfigError(
      'No marketplace API key, and no running daemon for this BERTH_HOME to ask: set BERTH_API_KEY, or BERTH_API_KEY_FILE / service.api_key_file to a file holding it (or start `berth daemon` and set BERTH_HOME to its home).',
      'service.api_key_file',
    );
  }
  // A doctor answers in seconds: a service that does not answer is reported, not waited for.
  const client = createMarketClient({
    baseUrl: config.service.base_url,
    apiKey: loaded.apiKey,
    config: { ...config, retry: { ...config.retry, max_retry_time_s: Math.min(config.retry.max_retry_time_s, 10) } },
  });
  try {
    // The key the daemon of this BERTH_HOME logs in with (made here when it does not exist yet).
    const loginKey = () => loadLoginKey({ home: berthHome(env), privateKeyPath: config.ssh.private_key_path });
    const report = await checkAccount(client, config, Date.now(), { loginKey });
    if (options.json) printJson(io, { ok: report.ok, checks: report.checks, missing: report.missing });
    else checkLines(report).forEach((l) => io.out(l));
    if (report.ok) return EXIT.ok;
    return report.authFailed ? EXIT.serviceAuth : EXIT.runEnded;
  } finally {
    await client.close().catch(() => undefined);
  }
}

/** The daemon's own checks, or undefined when no daemon of this BERTH_HOME answers. */
async function daemonChecks(env: NodeJS.ProcessEnv): Promise<AccountChecks | undefined> {
  let client: ControlClient;
  try {
    client = connectToDaemon(env);
  } catch {
    return undefined;
  }
  try {
    return await client.accountChecks();
  } catch (err) {
    if (err instanceof BerthError && err.code === 'daemon_unreachable') return undefined;
    throw err;
  }
}

function printDaemonChecks(report: AccountChecks, options: { json?: boolean }, io: Io): number {
  if (options.json) printJson(io, { ...report, via: 'daemon' });
  else {
    io.out('No API key in this terminal: the running daemon made the checks with its own key.');
    const width = Math.max(...report.checks.map((c) => c.name.length));
    report.checks.forEach((c) => io.out(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.name.padEnd(width)}  ${c.message}`));
  }
  if (report.ok) return EXIT.ok;
  const authFailed = report.missing.length > 0 || report.checks.some((c) => (c.name === 'key' || c.name === 'permissions') && !c.ok);
  return authFailed ? EXIT.serviceAuth : EXIT.runEnded;
}
