// The page's one way to the control API: same-origin fetch with the session cookie (the browser
// sends it; no script can read it), the session's CSRF token on every state-changing request, and
// every failure as an ApiError with the envelope's kind. The page never holds the control token.
import type { SpecIssue } from '../errors.js';
import type { StreamEvent, StreamOutput, UiSession } from '../wire/control-api.js';
import { suspectDown } from './link.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly kind: string,
    message: string,
    readonly issues: SpecIssue[] = [],
  ) {
    super(message);
  }
}

/**
 * The session's CSRF token, which every request carries (reads too): the sign-in answer gives it in
 * the page itself (a `berth-csrf` meta element: never in a URL, which lands in places another
 * party may read), and it is kept in this origin's storage, which a server on another port (that
 * may receive the session cookie) cannot read.
 */
const CSRF_KEY = 'berth_csrf';
let csrf: string | undefined = takeSignInToken();

function takeSignInToken(): string | undefined {
  const meta = document.querySelector('meta[name="berth-csrf"]');
  const given = meta?.getAttribute('content');
  if (given) {
    localStorage.setItem(CSRF_KEY, given);
    meta!.remove();
    // The used code leaves the address bar (a reload would only be refused with it).
    history.replaceState(null, '', `${location.pathname}${location.hash}`);
  }
  return localStorage.getItem(CSRF_KEY) ?? undefined;
}

/** Fired on window when the daemon answers 401: the page shows how to sign in again. */
export const SIGNED_OUT = 'berth:signed-out';

/** Reads the session's CSRF token; an ApiError 401 when the page is not signed in. */
export async function startSession(): Promise<UiSession> {
  const session = await call<UiSession>('GET', '/v1/ui/session');
  csrf = session.csrf_token;
  return session;
}

export interface Answer<T> {
  body: T;
  headers: Headers;
}

export async function callWithHeaders<T>(
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer<T>> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: { ...headers } };
  (init.headers as Record<string, string>)['x-csrf-token'] = csrf ?? '';
  if (body !== undefined) {
    (init.headers as Record<string, string>)['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res: Response;
  try {
    res = await fetch(path, init);
  } catch (err) {
    suspectDown();
    throw new ApiError(0, 'unreachable', `The daemon does not answer (${(err as Error).message}): is it still running?`);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (res.ok) return { body: parsed as T, headers: res.headers };
  const error = (parsed as { error?: { kind?: string; message?: string; issues?: SpecIssue[] } } | undefined)?.error;
  // The session ended (idle time, sign-out elsewhere, a token rotation, a daemon restart): the page says so.
  if (res.status === 401) dispatchEvent(new Event(SIGNED_OUT));
  throw new ApiError(res.status, error?.kind ?? `http_${res.status}`, error?.message ?? `HTTP ${res.status}`, error?.issues ?? []);
}

export async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown, headers?: Record<string, string>): Promise<T> {
  return (await callWithHeaders<T>(method, path, body, headers)).body;
}

/**
 * Follows GET /v1/events/stream (one run's, or every run's from now on). EventSource reconnects by
 * itself with Last-Event-ID, so a daemon restart loses no event. Returns the function that stops it.
 */
export function followEvents(
  query: { run?: string; after?: number },
  onEvent: (e: StreamEvent) => void,
  onState?: (open: boolean) => void,
  /** A run's task output as the daemon streams it (`output=1`): each batch of lines, once, by byte offset. */
  onOutput?: (o: StreamOutput) => void,
): () => void {
  const q = new URLSearchParams();
  if (query.run) q.set('run', query.run);
  if (query.after !== undefined) q.set('after', String(query.after));
  if (onOutput) q.set('output', '1');
  q.set('csrf', csrf ?? '');
  const source = new EventSource(`/v1/events/stream${q.size > 0 ? `?${q}` : ''}`);
  source.onmessage = (m: MessageEvent<string>) => onEvent(JSON.parse(m.data) as StreamEvent);
  if (onOutput) source.addEventListener('output', (m: MessageEvent<string>) => onOutput(JSON.parse(m.data) as StreamOutput));
  source.onopen = () => onState?.(true);
  source.onerror = () => {
    onState?.(false);
    // A stream that drops may mean the daemon is gone (it ends every stream when it stops).
    suspectDown();
    // EventSource gives up on an answer that is not a stream (a 401 once the session ended); a
    // read tells the page why.
    if (source.readyState === EventSource.CLOSED) void call('GET', '/v1/ui/session').catch(() => undefined);
  };
  // A run's stream ends with `end` once the run has ended: no reconnect then.
  source.addEventListener('end', () => source.close());
  return () => source.close();
}
