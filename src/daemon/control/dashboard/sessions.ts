// The dashboard's sign-in (issue #22 item 2): one-time codes, traded for sessions.
//
// `berth ui` asks for a code with the control token (POST /v1/ui/codes); the URL it prints carries
// the code, and GET /?code= trades it for a session cookie. A code is single use and lives
// CODE_TTL_MS; a session lives SESSION_IDLE_MS after its last request. The page never holds the
// control token, only the session cookie (HttpOnly, so no script reads it) and the session's CSRF
// token, which every state-changing request carries in X-CSRF-Token.
//
// States of a code: issued → redeemed (gone) | expired (gone). Of a session: live → ended (sign-out,
// `berth token rotate`, the idle time passing, or the daemon stopping: they are kept in memory only,
// so a restarted daemon starts with none).
//
// Codes and session ids are kept by their SHA-256, never as given: a lookup's time tells nothing of
// a stored secret, and a memory dump holds no usable one.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../../../clock.js';

/** How long a sign-in code can be used, ms. */
export const CODE_TTL_MS = 5 * 60_000;
/** How long a session lasts after its last request, ms. */
export const SESSION_IDLE_MS = 12 * 3_600_000;
/** At most this many codes and this many sessions are kept; the oldest go first. */
const MAX_KEPT = 64;

export interface Session {
  /** Sent back with every state-changing request (X-CSRF-Token). */
  csrf: string;
  createdAt: number;
  expiresAt: number;
}

export interface SignIn {
  /** The cookie's value: the session id. */
  sessionId: string;
  session: Session;
}

const digest = (secret: string) => createHash('sha256').update(secret).digest('hex');
const secret = () => randomBytes(32).toString('base64url');

export class DashboardSessions {
  private readonly codes = new Map<string, number>();
  private readonly sessions = new Map<string, Session>();

  constructor(private readonly clock: Pick<Clock, 'now'>) {}

  /** A new one-time code and when it expires (ms). */
  issueCode(): { code: string; expiresAt: number } {
    this.sweep();
    const code = secret();
    const expiresAt = this.clock.now() + CODE_TTL_MS;
    bounded(this.codes).set(digest(code), expiresAt);
    return { code, expiresAt };
  }

  /** Trades a code for a new session; undefined when the code is unknown, used or expired. */
  redeem(code: string): SignIn | undefined {
    const key = digest(code);
    const expiresAt = this.codes.get(key);
    // Used once, whatever happens next.
    this.codes.delete(key);
    const now = this.clock.now();
    if (expiresAt === undefined || now >= expiresAt) return undefined;
    const sessionId = secret();
    const session: Session = { csrf: secret(), createdAt: now, expiresAt: now + SESSION_IDLE_MS };
    bounded(this.sessions).set(digest(sessionId), session);
    return { sessionId, session };
  }

  /** The live session with this id, its idle time renewed; undefined when there is none. */
  use(sessionId: string): Session | undefined {
    const key = digest(sessionId);
    const session = this.sessions.get(key);
    if (!session) return undefined;
    const now = this.clock.now();
    if (now >= session.expiresAt) {
      this.sessions.delete(key);
      return undefined;
    }
    session.expiresAt = now + SESSION_IDLE_MS;
    return session;
  }

  /** The live session with this id, its idle time not renewed; undefined when there is none. */
  peek(sessionId: string): Session | undefined {
    const session = this.sessions.get(digest(sessionId));
    return session !== undefined && this.clock.now() < session.expiresAt ? session : undefined;
  }

  /** True while the session lives (its idle time not renewed: an open event stream asks this). */
  isLive(sessionId: string): boolean {
    return this.peek(sessionId) !== undefined;
  }

  /** True when `given` is the session's CSRF token (compared in constant time). */
  csrfMatches(session: Session, given: string | undefined): boolean {
    const a = Buffer.from(given ?? '');
    const b = Buffer.from(session.csrf);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  end(sessionId: string): void {
    this.sessions.delete(digest(sessionId));
  }

  /** Ends every session and forgets every code (`berth token rotate`). */
  endAll(): void {
    this.sessions.clear();
    this.codes.clear();
  }

  get liveSessions(): number {
    this.sweep();
    return this.sessions.size;
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const [k, at] of this.codes) if (now >= at) this.codes.delete(k);
    for (const [k, s] of this.sessions) if (now >= s.expiresAt) this.sessions.delete(k);
  }
}

/** The map with room for one more: its oldest entry (insertion order) goes when it is full. */
function bounded<V>(map: Map<string, V>): Map<string, V> {
  while (map.size >= MAX_KEPT) map.delete(map.keys().next().value!);
  return map;
}
