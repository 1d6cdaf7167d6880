// The dashboard's routes (issue #22): its page and assets at / (open, like /healthz: they hold no
// data and no secret; the data comes from the API routes, which take the session), the sign-in code
// `berth ui` asks for (control token only), the page's CSRF token, and sign-out.
import type { IncomingMessage } from 'node:http';
import { SignInCodeSchema, UiSessionSchema, type SignInCode, type UiSession } from '../../../wire/control-api.js';
import { HttpProblem, type Answer, type ControlRoute } from '../route-types.js';
import { DashboardAssets } from './assets.js';
import { clearedCookie, cookieName, sessionCookie } from './cookies.js';
import type { DashboardSessions } from './sessions.js';
import type { EventStreams } from '../event-stream.js';

export interface DashboardDeps {
  sessions: DashboardSessions;
  /** Its open event streams end with a session. */
  streams: Pick<EventStreams, 'recheck'>;
  assets?: DashboardAssets;
}

/**
 * The page's own scripts and styles only: no inline script, nothing from elsewhere, no framing.
 * `connect-src 'self'` keeps a script that got in anyway from sending data out.
 */
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  // The sign-in URL carries its code: no link followed from the page tells another site of it.
  'referrer-policy': 'no-referrer',
};

const iso = (ms: number) => new Date(ms).toISOString();
const portOf = (req: IncomingMessage) => req.socket.localPort ?? 0;

function signInFailed(): Answer {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>berth: sign-in failed</title></head>
<body><h1>This sign-in link cannot be used</h1><p>It was used already, it expired (a link lasts 5 minutes), or the daemon
was restarted or its control token rotated since. Run <code>berth ui</code> for a new one.</p></body></html>`;
  return { status: 401, text: html, contentType: 'text/html; charset=utf-8', headers: { ...PAGE_HEADERS, 'cache-control': 'no-store' } };
}

/** The page with the session's CSRF token in a meta element, which the page's script takes (src/ui/api.ts). */
function withCsrfToken(page: Buffer, csrf: string): string {
  const html = page.toString('utf8');
  const head = html.indexOf('<head>');
  const at = head < 0 ? 0 : head + '<head>'.length;
  return `${html.slice(0, at)}<meta name="berth-csrf" content="${csrf}" />${html.slice(at)}`;
}

export function dashboardRoutes(deps: DashboardDeps): ControlRoute[] {
  const { sessions } = deps;
  const assets = deps.assets ?? new DashboardAssets();
  return [
    {
      method: 'GET',
      path: '/',
      auth: 'open',
      doc: {
        summary: 'The web dashboard; with ?code= (from `berth ui`), signs in',
        query: [{ name: 'code', description: 'a one-time sign-in code (POST /v1/ui/codes)', schema: { type: 'string' } }],
        responses: {
          200: {
            description:
              'the page; with a good code, signed in: a session cookie is set and the session\'s CSRF token is given in the page (<meta name="berth-csrf">), never in a URL',
            contentType: 'text/html',
          },
          401: { description: 'the code is unknown, used or expired: a page that says so', contentType: 'text/html' },
        },
        errors: [404],
      },
      handle: ({ req, url }) => {
        const page = assets.get('index.html');
        if (!page)
          throw new HttpProblem(404, 'not_found', 'The dashboard is not built: run `npm run build` in the berth package, then reload.');
        const code = url.searchParams.get('code');
        if (code !== null) {
          const signIn = sessions.redeem(code);
          if (!signIn) return signInFailed();
          // The CSRF token goes to the page in the answer's body, which only the browser that
          // redeemed the code reads: never in a URL or a Location (issue #38 item 4), which land in
          // places (a history, a log, a process's arguments) another party may read. The page keeps
          // it in its origin's storage, which no other port can read (the cookie goes to any port;
          // ../control-api.ts asks both of every session request), and drops the code from its URL.
          return {
            status: 200,
            text: withCsrfToken(page.body, signIn.session.csrf),
            contentType: page.contentType,
            headers: {
              ...PAGE_HEADERS,
              'set-cookie': sessionCookie(cookieName(portOf(req)), signIn.sessionId),
              'cache-control': 'no-store',
            },
          };
        }
        return { status: 200, text: page.body, contentType: page.contentType, headers: { ...PAGE_HEADERS, 'cache-control': 'no-store' } };
      },
    },
    {
      method: 'GET',
      path: '/assets/{file}',
      auth: 'open',
      doc: {
        summary: "The dashboard's scripts and styles (built by `npm run build`, shipped in the package)",
        responses: { 200: { description: 'the file', contentType: 'text/javascript, text/css, text/html' } },
        errors: [404],
      },
      handle: ({ params }) => {
        const file = params.file!;
        const asset = file === 'index.html' ? undefined : assets.get(file);
        if (!asset) throw new HttpProblem(404, 'not_found', `No dashboard asset ${file.slice(0, 60)}.`);
        return { status: 200, text: asset.body, contentType: asset.contentType, headers: { ...PAGE_HEADERS, 'cache-control': 'no-cache' } };
      },
    },
    {
      method: 'POST',
      path: '/v1/ui/codes',
      auth: 'token',
      doc: {
        summary: 'A one-time sign-in code of the dashboard (`berth ui`): the URL signs a browser in once, within 5 minutes',
        description: 'Takes the control token only, never a dashboard session.',
        responses: { 201: { description: 'the sign-in URL', schema: SignInCodeSchema } },
      },
      handle: ({ host }) => {
        const { code, expiresAt } = sessions.issueCode();
        const body: SignInCode = { url: `http://${host}/?code=${code}`, expires_at: iso(expiresAt) };
        return { status: 201, body };
      },
    },
    {
      method: 'GET',
      path: '/v1/ui/session',
      doc: {
        summary:
          "The dashboard session: its CSRF token (the page's, sent in X-CSRF-Token with every request: this read too) and when it ends",
        responses: { 200: { description: 'the session', schema: UiSessionSchema } },
        errors: [400],
      },
      handle: ({ session }) => {
        if (!session)
          throw new HttpProblem(400, 'bad_request', 'No dashboard session: this route answers the page signed in by `berth ui`.');
        const body: UiSession = { csrf_token: session.session.csrf, expires_at: iso(session.session.expiresAt) };
        return { status: 200, body };
      },
    },
    {
      method: 'POST',
      path: '/v1/ui/sign-out',
      doc: {
        summary: 'Ends the dashboard session the request came with',
        responses: { 200: { description: 'signed out' } },
        errors: [400],
      },
      handle: ({ req, session }) => {
        if (!session) throw new HttpProblem(400, 'bad_request', 'No dashboard session to end.');
        sessions.end(session.sessionId);
        deps.streams.recheck();
        return { status: 200, body: { signed_out: true }, headers: { 'set-cookie': clearedCookie(cookieName(portOf(req))) } };
      },
    },
  ];
}
