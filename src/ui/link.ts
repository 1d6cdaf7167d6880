// Whether the daemon answers the page. States: `up` (it answered last), `down` (a request or an
// event stream failed and /healthz did not answer either). Left: `up` → `down` when a call finds no
// daemon or the watchdog's /healthz fails; `down` → `up` when /healthz answers again, which also
// fires RECONNECTED so that the page reads everything afresh. While down the page says so, marks
// its figures stale and turns its actions off (a page that still showed `running`, "Billed now" and
// an active Cancel button 25 s after the daemon stopped was telling the user something false).
import { useEffect, useState } from 'preact/hooks';

export interface Link {
  up: boolean;
  /** When the daemon was first found gone (ms), or null while it answers. */
  downSince: number | null;
}

/** Fired on window when the daemon answers again after it was found gone. */
export const RECONNECTED = 'berth:reconnected';

/** How often /healthz is read: while up, to notice a daemon gone with no stream open; while down, to notice it back. */
const WATCH_UP_MS = 5_000;
const WATCH_DOWN_MS = 2_000;

let link: Link = { up: true, downSince: null };
const listeners = new Set<(l: Link) => void>();
let timer: ReturnType<typeof setTimeout> | undefined;
let checking = false;

function set(next: Link): void {
  const wasDown = !link.up;
  link = next;
  for (const l of listeners) l(link);
  if (wasDown && next.up) dispatchEvent(new Event(RECONNECTED));
  schedule();
}

/** One read of /healthz (no token, no session needed): does the daemon answer? */
async function answers(): Promise<boolean> {
  try {
    const res = await fetch('/healthz', { cache: 'no-store', credentials: 'same-origin' });
    return res.ok;
  } catch {
    return false;
  }
}

async function check(): Promise<void> {
  if (checking) return;
  checking = true;
  try {
    const ok = await answers();
    if (ok && !link.up) set({ up: true, downSince: null });
    else if (!ok && link.up) set({ up: false, downSince: Date.now() });
    else schedule();
  } finally {
    checking = false;
  }
}

function schedule(): void {
  if (timer) clearTimeout(timer);
  timer = setTimeout(() => void check(), link.up ? WATCH_UP_MS : WATCH_DOWN_MS);
}

/** A request or a stream failed in a way that may mean the daemon is gone: look now. */
export function suspectDown(): void {
  void check();
}

export function startWatching(): void {
  schedule();
}

/** The link as a component sees it; re-renders on every change. */
export function useLink(): Link {
  const [state, setState] = useState(link);
  useEffect(() => {
    listeners.add(setState);
    setState(link);
    return () => void listeners.delete(setState);
  }, []);
  return state;
}
