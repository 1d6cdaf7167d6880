// `berth doctor [--config FILE] [--json]`: the account checks (src/account/account-checks.ts), one
// line per check, against the service the daemon would use, with the key it would use. Exit 0 when
// every check passes, 4 when the key is rejected or lacks a permission, 1 for any other failure.
import { createMarketClient } from '../../client/marketplace-client.js';
import { loadConfig } from '../../config/load.js';
import { checkAccount, checkLines } from '../../account/account-checks.js';
import { ConfigError } from '../../errors.js';
import { EXIT } from '../exit-codes.js';
import { printJson, type Io } from '../io.js';

export async function doctorCommand(options: { config?: string; json?: boolean }, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const { config, env: loaded } = loadConfig({ configFile: options.config }, env);
  if (!loaded.apiKey) {
    throw new ConfigError(
      'No marketplace API key: set BERTH_API_KEY, or BERTH_API_KEY_FILE / service.api_key_file to a file holding it.',
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
    const report = await checkAccount(client, config, Date.now());
    if (options.json) printJson(io, { ok: report.ok, checks: report.checks, missing: report.missing });
    else checkLines(report).forEach((l) => io.out(l));
    if (report.ok) return EXIT.ok;
    return report.authFailed ? EXIT.serviceAuth : EXIT.runEnded;
  } finally {
    await client.close().catch(() => undefined);
  }
}
