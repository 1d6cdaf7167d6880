// The dashboard's sign-in (src/daemon/control/dashboard/sessions.ts) on a clock the test moves:
// one-time codes, their expiry, sessions and their idle time, the CSRF check, and the end of every
// session on a token rotation.
import { describe, expect, it } from 'vitest';
import { CODE_TTL_MS, DashboardSessions, SESSION_IDLE_MS } from '../../../../../src/daemon/control/dashboard/sessions.js';
import { FakeClock } from '../../../../helpers/fake-clock.js';

function setup() {
  const clock = new FakeClock();
  return { clock, sessions: new DashboardSessions(clock) };
}

describe('dashboard sign-in codes', () => {
  it('trades a code for a session once, and never a second time', () => {
    const { sessions } = setup();
    const { code } = sessions.issueCode();
    const signIn = sessions.redeem(code);
    expect(signIn).toBeDefined();
    expect(sessions.use(signIn!.sessionId)).toBe(signIn!.session);
    expect(sessions.redeem(code)).toBeUndefined();
  });

  it('refuses a code that was never issued', () => {
    const { sessions } = setup();
    sessions.issueCode();
    expect(sessions.redeem('A'.repeat(43))).toBeUndefined();
    expect(sessions.redeem('')).toBeUndefined();
  });

  it('refuses a code once its time is up, and forgets it even when it was refused', async () => {
    const { clock, sessions } = setup();
    const { code, expiresAt } = sessions.issueCode();
    expect(expiresAt).toBe(clock.now() + CODE_TTL_MS);
    await clock.advance(CODE_TTL_MS);
    expect(sessions.redeem(code)).toBeUndefined();

    const late = sessions.issueCode();
    await clock.advance(CODE_TTL_MS - 1);
    expect(sessions.redeem(late.code)).toBeDefined();
  });

  it('makes codes and session ids that are long random strings, each different', () => {
    const { sessions } = setup();
    const codes = new Set(Array.from({ length: 50 }, () => sessions.issueCode().code));
    expect(codes.size).toBe(50);
    for (const c of codes) expect(c).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});

describe('dashboard sessions', () => {
  it('ends a session after its idle time, and renews the time with each use', async () => {
    const { clock, sessions } = setup();
    const { sessionId } = sessions.redeem(sessions.issueCode().code)!;
    await clock.advance(SESSION_IDLE_MS - 1000);
    expect(sessions.use(sessionId)).toBeDefined();
    await clock.advance(SESSION_IDLE_MS - 1000);
    expect(sessions.use(sessionId)).toBeDefined();
    await clock.advance(SESSION_IDLE_MS);
    expect(sessions.use(sessionId)).toBeUndefined();
    expect(sessions.liveSessions).toBe(0);
  });

  it('tells whether a session lives without renewing it (an open event stream asks)', async () => {
    const { clock, sessions } = setup();
    const { sessionId } = sessions.redeem(sessions.issueCode().code)!;
    expect(sessions.isLive(sessionId)).toBe(true);
    await clock.advance(SESSION_IDLE_MS - 1);
    expect(sessions.isLive(sessionId)).toBe(true);
    await clock.advance(1);
    expect(sessions.isLive(sessionId)).toBe(false);
    expect(sessions.isLive('nosuch')).toBe(false);
  });

  it("accepts only the session's own CSRF token", () => {
    const { sessions } = setup();
    const a = sessions.redeem(sessions.issueCode().code)!;
    const b = sessions.redeem(sessions.issueCode().code)!;
    expect(sessions.csrfMatches(a.session, a.session.csrf)).toBe(true);
    expect(sessions.csrfMatches(a.session, b.session.csrf)).toBe(false);
    expect(sessions.csrfMatches(a.session, undefined)).toBe(false);
    expect(sessions.csrfMatches(a.session, '')).toBe(false);
    expect(sessions.csrfMatches(a.session, a.session.csrf.slice(1))).toBe(false);
  });

  it('ends one session on sign-out, and every session and code on endAll (a token rotation)', () => {
    const { sessions } = setup();
    const a = sessions.redeem(sessions.issueCode().code)!;
    const b = sessions.redeem(sessions.issueCode().code)!;
    sessions.end(a.sessionId);
    expect(sessions.use(a.sessionId)).toBeUndefined();
    expect(sessions.use(b.sessionId)).toBeDefined();
    const pending = sessions.issueCode();
    sessions.endAll();
    expect(sessions.use(b.sessionId)).toBeUndefined();
    expect(sessions.redeem(pending.code)).toBeUndefined();
  });

  it('keeps a bounded number of sessions, ending the oldest first', () => {
    const { sessions } = setup();
    const first = sessions.redeem(sessions.issueCode().code)!;
    const rest = Array.from({ length: 64 }, () => sessions.redeem(sessions.issueCode().code)!);
    expect(sessions.use(first.sessionId)).toBeUndefined();
    expect(sessions.use(rest.at(-1)!.sessionId)).toBeDefined();
    expect(sessions.liveSessions).toBe(64);
  });
});
