// The readiness callback's secret (the seed: "the onstart script of an instance may call back a
// client when the instance is ready"). Each attempt gets its own token, which its onstart posts to
// `readiness.callback_url` once the user's script has run:
//
//   <run id>.<attempt n>.<base64url HMAC-SHA256(key, "berth-ready:v1\n<run id>\n<n>")>
//
// Derived, not stored: the key (32 random bytes kept in berth.db, see Store.secretKey) is all the
// daemon needs to check a token after any restart, and a token names the one attempt it is good
// for, so a token seen in one instance's script can mark nothing else ready. Tokens are secrets:
// never logged, scrubbed from fetched container logs and from the service's error texts.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Where the key lives in berth.db. */
export const READY_KEY_NAME = 'ready_callback';

const TOKEN = /^([a-z2-7]{1,64})\.([1-9][0-9]{0,8})\.([A-Za-z0-9_-]{43})$/;

export class ReadyTokens {
  constructor(private readonly key: Buffer) {}

  tokenFor(runId: string, n: number): string {
    return `${runId}.${n}.${this.mac(runId, n).toString('base64url')}`;
  }

  /** The attempt a token is good for, or null for anything this daemon did not make. */
  verify(token: string): { runId: string; n: number } | null {
    const m = TOKEN.exec(token);
    if (!m) return null;
    const runId = m[1]!;
    const n = Number(m[2]);
    const given = Buffer.from(m[3]!, 'base64url');
    const want = this.mac(runId, n);
    return given.length === want.length && timingSafeEqual(given, want) ? { runId, n } : null;
  }

  private mac(runId: string, n: number): Buffer {
    return createHmac('sha256', this.key).update(`berth-ready:v1\n${runId}\n${n}`).digest();
  }
}

/** `text` as one single-quoted sh word. */
function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * The line appended to an attempt's onstart: posts `{"token": ...}` to the callback URL with curl,
 * or wget where the image has no curl, retrying a refused or failed connection for about a minute,
 * and printing nothing (a container log never shows the token). Without either tool it does nothing
 * and readiness falls back to the SSH probe (or the status).
 */
export function callbackLine(url: string, token: string): string {
  const body = shellQuote(JSON.stringify({ token }));
  const to = shellQuote(url);
  const curl = `curl -fsS -m 10 --retry 5 --retry-connrefused --retry-max-time 60 -X POST -H 'Content-Type: application/json' --data ${body} ${to}`;
  const wget = `wget -q -O /dev/null -T 10 -t 5 --header='Content-Type: application/json' --post-data=${body} ${to}`;
  return `{ if command -v curl >/dev/null 2>&1; then ${curl}; else ${wget}; fi; } >/dev/null 2>&1 || true`;
}
