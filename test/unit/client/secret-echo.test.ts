// A service that echoes what it was sent, in every form seen: verbatim, in another letter case,
// JSON-escaped, cut short, or in its `error` field. No error message berth builds from its answers
// may carry the API key or an env value in any of those forms.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import { scrubSecrets } from '../../../src/client/scrub.js';
import { toRunError } from '../../../src/errors.js';
import { json, startFakeServer, testConfig, type FakeServer } from './fake-server.js';

const API_KEY = 'sk-Live-4f9a2B7c1d0E8f6A5b3C';
const ENV_VALUE = 'hf_Tok"en\\with-quote-and-ü-9876';
const env = { HF_TOKEN: ENV_VALUE };

/** Every way the service might echo a secret. */
function echoes(secret: string): Record<string, string> {
  return {
    verbatim: secret,
    upper: secret.toUpperCase(),
    lower: secret.toLowerCase(),
    json: JSON.stringify(secret).slice(1, -1),
    pythonJson: JSON.stringify(secret)
      .slice(1, -1)
      .replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
    prefix: secret.slice(0, 12),
    suffix: secret.slice(-9),
    middle: secret.slice(5, 16),
    urlEncoded: encodeURIComponent(secret),
  };
}

/** True when `text` holds any 6-character piece of any form of `secret`, whatever the case. */
function leaks(text: string, secret: string): boolean {
  const hay = text.toLowerCase();
  return Object.values(echoes(secret)).some((form) => {
    const f = form.toLowerCase();
    for (let i = 0; i + 6 <= f.length; i++) if (hay.includes(f.slice(i, i + 6))) return true;
    return false;
  });
}

let server: FakeServer;
let client: MarketplaceClient;
beforeEach(async () => {
  server = await startFakeServer();
  client = createMarketClient({ baseUrl: server.url, apiKey: API_KEY, config: testConfig({ retry: { max_retry_time_s: 0.2 } }) });
});
afterEach(async () => {
  await client.close();
  await server.close();
});

const cases = [
  ...Object.entries(echoes(API_KEY)).map(([form, text]) => ({ what: `the key, ${form}`, secret: API_KEY, text })),
  ...Object.entries(echoes(ENV_VALUE)).map(([form, text]) => ({ what: `an env value, ${form}`, secret: ENV_VALUE, text })),
];

describe('service text quoted in errors never carries a secret', () => {
  it.each(cases)('400 on create echoing $what in msg and error', async ({ text, secret }) => {
    server.setHandler((_q, res) =>
      json(res, 400, { success: false, error: text, msg: `error 400/3001: bad input near ${text} (${text})` }),
    );
    const err = await client.createInstance(1, { image: 'img', disk: 10, label: 'berth:s:r:1', env }).catch((e: unknown) => e);
    const shown = JSON.stringify({ ...toRunError(err), serviceCode: (err as { serviceCode?: unknown }).serviceCode });
    expect(shown).toContain('400');
    expect(leaks(shown, secret)).toBe(false);
  });

  it.each(cases)('404 auth_error, 403 about an offer and 200 success:false echoing $what', async ({ text, secret }) => {
    // The create comes first: an env value is known to the client once it has been sent.
    const answers: Array<() => [number, unknown]> = [
      () => [403, { success: false, error: 'invalid_args', msg: `error 403/3586: Offer 7 is not your own. ${text}`, ask_id: 7 }],
      () => [404, { error: 'auth_error', msg: `Invalid user key ${text}` }],
      () => [200, { success: false, error: 'busy', msg: `cannot destroy: ${text}` }],
      () => [500, `Internal error: ${text}`],
    ];
    let n = 0;
    server.setHandler((_q, res) => {
      const [status, body] = answers[Math.min(n++, answers.length - 1)]!();
      if (typeof body === 'string') {
        res.writeHead(status, { 'content-type': 'text/plain' });
        return res.end(body);
      }
      return json(res, status, body);
    });
    const errors = [
      await client.createInstance(7, { image: 'img', disk: 10, label: 'berth:s:r:1', env }).catch((e: unknown) => e),
      await client.searchOffers({}).catch((e: unknown) => e),
      await client.destroyInstance(3).catch((e: unknown) => e),
      await client.listInstances().catch((e: unknown) => e),
    ];
    for (const err of errors) {
      expect(err).toBeInstanceOf(Error);
      expect(leaks(JSON.stringify(toRunError(err)), secret)).toBe(false);
    }
  });
});

describe('scrubSecrets', () => {
  it('keeps ordinary text and marks each removed run once', () => {
    expect(scrubSecrets(`key ${API_KEY} rejected`, [API_KEY])).toBe('key [redacted] rejected');
    expect(scrubSecrets('Offer 7 is not available', [API_KEY])).toBe('Offer 7 is not available');
  });

  it('does not seek very short values, which would blank ordinary words', () => {
    expect(scrubSecrets('true 1 ok', ['1', 'ok'])).toBe('true 1 ok');
  });
});
