// The dashboard's session cookie. Cookies are not kept apart by port, so its name carries the
// daemon's port: two daemons on one machine (two BERTH_HOMEs) do not sign each other out.
import type { IncomingMessage } from 'node:http';

export const cookieName = (port: number) => `berth_session_${port}`;

/**
 * The values of every cookie `name` in the request's Cookie header, in the order sent. There may be
 * several: a page on another port of 127.0.0.1 can set one of this name (cookies are not kept apart
 * by port) on a longer path such as /v1, which the browser sends before ours (issue #38 item 6).
 */
export function readCookies(req: IncomingMessage, name: string): string[] {
  const values: string[] = [];
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) values.push(part.slice(i + 1).trim());
  }
  return values;
}

/**
 * HttpOnly: no script of the page (nor one injected into it) reads it. SameSite=Strict: no other
 * site's page or link sends it. No Max-Age: it goes with the browser session, and the daemon ends
 * the session itself after its idle time.
 */
export const sessionCookie = (name: string, value: string) => `${name}=${value}; HttpOnly; SameSite=Strict; Path=/`;

export const clearedCookie = (name: string) => `${name}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`;
