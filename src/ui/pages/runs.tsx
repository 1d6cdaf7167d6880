// Runs: one page of runs at a time (the server pages them: 10,000 runs cost one page's query),
// filtered by state and name, kept live by the event stream of every run: a run on the page that
// has an event is read again, and a new run appears on the first page, all without a reload.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Run } from '../../wire/control-api.js';
import { keptForSshText, keptRunNeeds, RUN_STATES, warmText } from '../../wire/run-states.js';
import { callWithHeaders, followEvents, call } from '../api.js';
import { ago, localTime, usd, usdPerHour } from '../format.js';
import { ErrorNote, StateBadge, useNow } from '../parts/common.js';

const PAGE = 50;
const LIVE = RUN_STATES.filter((s) => !['succeeded', 'failed', 'cancelled', 'expired'].includes(s)).join(',');

interface Query {
  state: string;
  name: string;
  /** The last run id of each earlier page: the way back. */
  cursors: string[];
}

function pagePath(q: Query): string {
  const p = new URLSearchParams({ limit: String(PAGE) });
  if (q.state) p.set('state', q.state);
  if (q.name) p.set('name', q.name);
  const after = q.cursors.at(-1);
  if (after) p.set('after', after);
  return `/v1/runs?${p}`;
}

export function RunsPage() {
  const [query, setQuery] = useState<Query>({ state: '', name: '', cursors: [] });
  const [nameInput, setNameInput] = useState('');
  const [runs, setRuns] = useState<Run[] | undefined>(undefined);
  const [total, setTotal] = useState<number | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [live, setLive] = useState(false);
  const now = useNow();
  const queryRef = useRef(query);
  queryRef.current = query;

  const load = async (q: Query) => {
    try {
      const { body, headers } = await callWithHeaders<Run[]>('GET', pagePath(q));
      if (queryRef.current !== q) return;
      setRuns(body);
      setTotal(Number(headers.get('x-total-count') ?? body.length));
      setError(undefined);
    } catch (err) {
      setError(err);
    }
  };

  useEffect(() => void load(query), [query]);

  // The name filter waits for a pause in typing.
  useEffect(() => {
    const t = setTimeout(() => setQuery((q) => (q.name === nameInput.trim() ? q : { ...q, name: nameInput.trim(), cursors: [] })), 250);
    return () => clearTimeout(t);
  }, [nameInput]);

  // Live: every run's events. A run shown is read again (coalesced); anything else on the first
  // page reloads it (a new run, or one that entered the filter).
  const runsRef = useRef(runs);
  runsRef.current = runs;
  useEffect(() => {
    const stale = new Set<string>();
    let reloadPage = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const flush = async () => {
      timer = undefined;
      const q = queryRef.current;
      if (reloadPage) {
        reloadPage = false;
        stale.clear();
        return load(q);
      }
      const ids = [...stale];
      stale.clear();
      const fresh = await Promise.all(ids.map((id) => call<Run>('GET', `/v1/runs/${encodeURIComponent(id)}`).catch(() => undefined)));
      if (queryRef.current !== q) return;
      // A run that left the state filter (a live run that ended) leaves the page: it is read again.
      if (q.state && fresh.some((f) => f && !q.state.split(',').includes(f.state))) return load(q);
      setRuns((rs) => rs?.map((r) => fresh.find((f) => f?.id === r.id) ?? r));
    };
    return followEvents(
      {},
      (e) => {
        const shown = runsRef.current?.some((r) => r.id === e.run_id);
        if (shown) stale.add(e.run_id);
        else if (queryRef.current.cursors.length === 0) reloadPage = true;
        else return;
        timer ??= setTimeout(() => void flush(), 150);
      },
      setLive,
    );
  }, []);

  const page = query.cursors.length + 1;
  const pages = total === undefined ? undefined : Math.max(1, Math.ceil(total / PAGE));
  return (
    <>
      <h1>Runs</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()} role="search">
        <label>
          State{' '}
          <select value={query.state} onChange={(e) => setQuery({ ...query, state: (e.target as HTMLSelectElement).value, cursors: [] })}>
            <option value="">any</option>
            <option value={LIVE}>live (not ended)</option>
            {RUN_STATES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Name <input type="search" value={nameInput} onInput={(e) => setNameInput((e.target as HTMLInputElement).value)} />
        </label>
        <span class="muted" aria-live="polite">
          {live ? 'live' : 'connecting to the event stream…'}
          {total !== undefined && ` · ${total} run${total === 1 ? '' : 's'}`}
        </span>
      </form>
      <ErrorNote error={error} />
      {runs === undefined ? (
        <p class="notice">Loading…</p>
      ) : runs.length === 0 ? (
        <p class="notice">{query.state || query.name ? 'No run matches.' : 'No runs yet: submit one.'}</p>
      ) : (
        <div class="table-wrap">
          <table class="runs stack">
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">State</th>
                <th scope="col">GPU</th>
                <th scope="col" class="num">
                  $/h now
                </th>
                <th scope="col" class="num">
                  Spend
                </th>
                <th scope="col">Age</th>
                <th scope="col" class="num">
                  Attempts
                </th>
              </tr>
            </thead>
            <tbody>
              {runs.map((r) => (
                <tr data-run={r.id}>
                  <td>
                    <a href={`#/runs/${encodeURIComponent(r.id)}`}>{r.name}</a>
                    <div class="muted mono">{r.id}</div>
                  </td>
                  <td>
                    <StateBadge state={r.state} />
                    {r.instance?.keep_until && <div class="muted">{keptForSshText(r.instance.keep_until)}</div>}
                    {r.warm && <div class="muted">{warmText(r.warm)}</div>}
                    {r.held && <span class="badge tone-warn">held</span>}
                    {r.unreadable && (
                      <span class="badge tone-warn" title={`this berth cannot drive it: it needs ${keptRunNeeds(r.unreadable)}`}>
                        kept
                      </span>
                    )}
                    {r.error && (
                      <div class="muted reason" title={r.error.message}>
                        {r.error.kind.replaceAll('_', ' ')}
                      </div>
                    )}
                  </td>
                  <td data-label="GPU">{r.gpu_rented ? r.gpu : <span class="muted">asked: {r.gpu ?? 'any'}</span>}</td>
                  <td class="num" data-label="Now">
                    {r.instance === null && r.cost.usd_per_hour === 0 ? <span class="muted">none</span> : usdPerHour(r.cost.usd_per_hour)}
                  </td>
                  <td class="num" data-label="Spend">
                    {usd(r.cost.usd, 4)}
                  </td>
                  <td data-label="Age">
                    <time dateTime={r.created_at} title={localTime(r.created_at)}>
                      {ago(r.created_at, now)}
                    </time>
                  </td>
                  <td class="num" data-label="Attempts">
                    {r.attempts.length}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <nav class="pager" aria-label="Pages of runs">
        <button
          type="button"
          disabled={query.cursors.length === 0}
          onClick={() => setQuery({ ...query, cursors: query.cursors.slice(0, -1) })}
        >
          ← Newer
        </button>
        <span>
          Page {page}
          {pages !== undefined && ` of ${pages}`}
        </span>
        <button
          type="button"
          disabled={!runs || runs.length < PAGE}
          onClick={() => runs && setQuery({ ...query, cursors: [...query.cursors, runs.at(-1)!.id] })}
        >
          Older →
        </button>
      </nav>
    </>
  );
}
