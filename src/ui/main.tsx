// The berth dashboard (issue #22): a page served by the daemon at /, signed in by `berth ui`. The
// route is the URL's hash (#/runs/ID...), so the daemon serves one page for all of them and a
// reload or a shared link lands where it was.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, call, SIGNED_OUT, startSession } from './api.js';
import { RECONNECTED, startWatching, useLink } from './link.js';
import { AccountPage } from './pages/account.js';
import { MoneyPage } from './pages/money.js';
import { RunPage } from './pages/run.js';
import { RunsPage } from './pages/runs.js';
import { SubmitPage } from './pages/submit.js';

type Route = { page: 'runs' } | { page: 'run'; id: string } | { page: 'money' } | { page: 'account' } | { page: 'submit' };

function routeOf(hash: string): Route {
  const path = hash.replace(/^#/, '') || '/';
  const run = /^\/runs\/([^/]+)$/.exec(path);
  if (run) return { page: 'run', id: decodeURIComponent(run[1]!) };
  if (path === '/money') return { page: 'money' };
  if (path === '/account') return { page: 'account' };
  if (path === '/submit') return { page: 'submit' };
  return { page: 'runs' };
}

function useRoute(): Route {
  const [route, setRoute] = useState(() => routeOf(location.hash));
  useEffect(() => {
    const onHash = () => setRoute(routeOf(location.hash));
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  return route;
}

const NAV: Array<{ href: string; label: string; pages: Route['page'][] }> = [
  { href: '#/', label: 'Runs', pages: ['runs', 'run'] },
  { href: '#/money', label: 'Money', pages: ['money'] },
  { href: '#/account', label: 'Account & health', pages: ['account'] },
  { href: '#/submit', label: 'Submit', pages: ['submit'] },
];

/** Said while the daemon does not answer: what is stale, what is off, and that the page tries again by itself. */
function DaemonGone({ since }: { since: number }) {
  return (
    <div class="banner" role="alert" data-testid="daemon-gone">
      <strong>The daemon does not answer</strong> (since {new Date(since).toLocaleTimeString()}). The figures below are as they were then
      and may be stale; cancel, submit and the other actions are off until it is back. This page tries again every few seconds. If the
      daemon restarted, sign in again with a new <code>berth ui</code> link.
    </div>
  );
}

function Shell({ route }: { route: Route }) {
  const link = useLink();
  // Each reconnect mounts the page afresh: it reads the run (or the list) and its events again.
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    const again = () => {
      setGeneration((g) => g + 1);
      // A daemon that restarted forgot the session: this read makes the page say so (SIGNED_OUT).
      void startSession().catch(() => undefined);
    };
    addEventListener(RECONNECTED, again);
    return () => removeEventListener(RECONNECTED, again);
  }, []);
  const signOut = async () => {
    await call('POST', '/v1/ui/sign-out').catch(() => undefined);
    location.reload();
  };
  return (
    <>
      {/* A button, not a #main link: the hash is the page's route. */}
      <button type="button" class="skip" onClick={() => document.getElementById('main')?.focus()}>
        Skip to the page
      </button>
      <header class="top">
        <a class="brand" href="#/">
          berth
        </a>
        <nav aria-label="Pages">
          {NAV.map((n) => (
            <a href={n.href} aria-current={n.pages.includes(route.page) ? 'page' : undefined}>
              {n.label}
            </a>
          ))}
        </nav>
        <button type="button" class="quiet-button" disabled={!link.up} onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      {!link.up && link.downSince !== null && <DaemonGone since={link.downSince} />}
      <main id="main" tabIndex={-1} key={generation} class={link.up ? undefined : 'stale'} aria-busy={!link.up}>
        {route.page === 'runs' && <RunsPage />}
        {route.page === 'run' && <RunPage id={route.id} key={route.id} />}
        {route.page === 'money' && <MoneyPage />}
        {route.page === 'account' && <AccountPage />}
        {route.page === 'submit' && <SubmitPage />}
      </main>
    </>
  );
}

function App() {
  const route = useRoute();
  const [signedIn, setSignedIn] = useState<'checking' | 'yes' | 'no'>('checking');
  useEffect(() => {
    startWatching();
    startSession().then(
      () => setSignedIn('yes'),
      (err: unknown) => setSignedIn(err instanceof ApiError && err.status === 401 ? 'no' : 'yes'),
    );
    const signedOut = () => setSignedIn('no');
    addEventListener(SIGNED_OUT, signedOut);
    return () => removeEventListener(SIGNED_OUT, signedOut);
  }, []);
  if (signedIn === 'checking') return <p class="notice">Signing in…</p>;
  if (signedIn === 'no')
    return (
      <main class="signed-out">
        <h1>Not signed in</h1>
        <p>
          Run <code>berth ui</code> on the machine where the daemon runs: it prints a one-time link (good for 5 minutes) that signs this
          browser in. A session ends after 12 hours unused, when the daemon restarts, or with <code>berth token rotate</code>.
        </p>
      </main>
    );
  return <Shell route={route} />;
}

render(<App />, document.getElementById('app')!);
