// Run: the story of one run. Its attempts on a timeline, its event log live (the run's own event
// stream, from the last event read), how to SSH in, the last log lines of failed attempts and the
// container's output, its spend, and cancel or resume behind a confirmation.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Run, RunEvent, RunLogs, StreamOutput } from '../../wire/control-api.js';
import { attemptIsLive, isEndState, keptForSshText, keptRunNeeds, warmText } from '../../wire/run-states.js';
import { call, followEvents } from '../api.js';
import { ago, localTime, usd, usdPerHour } from '../format.js';
import { Coded, ConfirmButton, CopyButton, ErrorNote, LogBox, Section, StateBadge, useNow } from '../parts/common.js';
import { useLink } from '../link.js';
import { AttemptTimeline } from '../parts/timeline.js';

async function allEvents(id: string): Promise<RunEvent[]> {
  const all: RunEvent[] = [];
  for (;;) {
    const after = all.at(-1)?.id ?? 0;
    const page = await call<RunEvent[]>('GET', `/v1/runs/${encodeURIComponent(id)}/events?after=${after}`);
    if (page.length === 0) return all;
    all.push(...page);
  }
}

/** One SSH line per endpoint that answered, else the listed proxy's (as `berth status` prints them). */
function sshLines(run: Run): Array<{ line: string; kind: string }> {
  const i = run.instance;
  if (!i) return [];
  if (i.ssh.length > 0) return i.ssh.map((e) => ({ line: `ssh -p ${e.port} root@${e.host}`, kind: e.kind }));
  return i.ssh_host && i.ssh_port ? [{ line: `ssh -p ${i.ssh_port} root@${i.ssh_host}`, kind: 'proxy' }] : [];
}

/** How often a running task's output is read again while the daemon does not stream it (as `berth logs --follow`). */
const LIVE_REREAD_MS = 5_000;

/** Lines of the container output kept on the page. */
const SHOWN_LINES = 200;

/**
 * The log shown with a batch of streamed output appended: only while the log read said it is
 * streamed, and each batch once (one that ends at or before the byte shown was in the read).
 */
function withOutput(shown: RunLogs | 'loading' | undefined, o: StreamOutput): RunLogs | 'loading' | undefined {
  if (!shown || shown === 'loading' || !shown.stream) return shown;
  const { n, offset } = shown.stream;
  if (o.n < n || (o.n === n && o.to <= offset)) return shown;
  const gap = o.left_out > 0 || (o.n === n ? o.from > offset : o.from > 0);
  const lines = [...(shown.text === '' ? [] : shown.text.split('\n')), ...(gap ? ['(some lines were left out)'] : []), ...o.lines];
  return { ...shown, text: lines.slice(-SHOWN_LINES).join('\n'), stream: { n: o.n, offset: o.to } };
}

export function RunPage({ id }: { id: string }) {
  // The run as last read, and when: the spend shown runs on from it at the rate billed (issue #50).
  const [fetched, setFetched] = useState<{ run: Run; at: number } | undefined>(undefined);
  const setRun = (r: Run) => setFetched({ run: r, at: Date.now() });
  const run = fetched?.run;
  const [events, setEvents] = useState<RunEvent[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  const [logs, setLogs] = useState<RunLogs | 'loading' | undefined>(undefined);
  const [logError, setLogError] = useState<unknown>(undefined);
  const now = useNow(1000);
  const { up } = useLink();
  const path = `/v1/runs/${encodeURIComponent(id)}`;
  const refresh = useRef<() => void>(() => undefined);

  useEffect(() => {
    let stop: (() => void) | undefined;
    let gone = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const reread = () => {
      timer ??= setTimeout(() => {
        timer = undefined;
        call<Run>('GET', path).then(
          (r) => !gone && setRun(r),
          (err: unknown) => !gone && setError(err),
        );
      }, 100);
    };
    refresh.current = reread;
    (async () => {
      const [r, evs] = await Promise.all([call<Run>('GET', path), allEvents(id)]);
      if (gone) return;
      setRun(r);
      setEvents(evs);
      stop = followEvents(
        { run: id, after: evs.at(-1)?.id ?? 0 },
        (e) => {
          setEvents((list) => (list.some((x) => x.id === e.id) ? list.map((x) => (x.id === e.id ? e : x)) : [...list, e]));
          reread();
        },
        undefined,
        // The task's output while the daemon streams it: appended to the log shown, from the byte it was read at.
        (o) => setLogs((shown) => withOutput(shown, o)),
      );
    })().catch((err: unknown) => !gone && setError(err));
    return () => {
      gone = true;
      stop?.();
      if (timer) clearTimeout(timer);
    };
  }, [id]);

  const loadLogs = async (again = false) => {
    // Read again while live: the lines shown stay until the new ones come.
    if (!again) setLogs('loading');
    setLogError(undefined);
    try {
      setLogs(await call<RunLogs>('GET', `${path}/logs?tail=200`));
    } catch (err) {
      setLogs(undefined);
      setLogError(err);
    }
  };

  // A running task's output, shown without a click (issue #50): read once the task's run holds an
  // instance it runs in (a run without a task keeps the button: no SSH follow streams it, and each
  // read may be a call to the service), then kept up by the event stream's batches while the daemon streams
  // it, or read again every LIVE_REREAD_MS when it does not (as `berth logs --follow` does).
  const live = run !== undefined && run.task && run.instance !== null && run.state === 'running';
  useEffect(() => {
    if (!live) return;
    if (logs === undefined) {
      void loadLogs();
      return;
    }
    if (logs === 'loading' || logs.stream) return;
    const timer = setTimeout(() => void loadLogs(true), LIVE_REREAD_MS);
    return () => clearTimeout(timer);
  }, [live, logs]);

  if (!run)
    return (
      <>
        <p>
          <a href="#/">← Runs</a>
        </p>
        {error ? <ErrorNote error={error} /> : <p class="notice">Loading…</p>}
      </>
    );

  const ended = isEndState(run.state);
  // Only attempts that ended: a running attempt's kept tail is the live output below.
  const endedLogs = run.attempts.filter((a) => a.logs && !attemptIsLive(a));
  // What the run has spent by now: the last read, and what billed since at its rate.
  const spentNow = run.cost.usd + (ended ? 0 : (run.cost.usd_per_hour * Math.max(0, now - fetched!.at)) / 3_600_000);
  const everRented = run.attempts.some((a) => a.instance_id !== null);
  const holdsNothing = run.instance === null && run.cost.usd_per_hour === 0;
  return (
    <>
      <p>
        <a href="#/">← Runs</a>
      </p>
      <h1>
        {run.name} <StateBadge state={run.state} />
        {run.held && <span class="badge tone-warn">held</span>}
        {run.unreadable && <span class="badge tone-warn">kept</span>}
        {run.outputs_missing && <span class="badge tone-warn">outputs {run.outputs_missing.state.replace('_', ' ')}</span>}
      </h1>
      <p class="muted mono">{run.id}</p>
      <ErrorNote error={error} />
      <div class="summary">
        <div>
          <span class="label">Spend</span>
          <strong data-testid="run-spend">{usd(spentNow, 4)}</strong>
        </div>
        <div>
          <span class="label">Billed now</span>
          <strong data-testid="run-billed-now">{holdsNothing ? 'nothing' : usdPerHour(run.cost.usd_per_hour)}</strong>
        </div>
        <div>
          <span class="label">Attempts</span>
          <strong>{run.attempts.length}</strong>
        </div>
        <div>
          <span class="label">Relax level</span>
          <strong>{run.relax_level}</strong>
        </div>
        <div>
          <span class="label">Submitted</span>
          <time dateTime={run.created_at} title={localTime(run.created_at)}>
            {ago(run.created_at, now)}
          </time>
        </div>
      </div>
      {run.unreadable && !ended && (
        <p class="notice tone-warn" data-testid="run-kept">
          Kept: this berth cannot drive this run ({run.unreadable.reason}); it needs {keptRunNeeds(run.unreadable)}. Its instance is left as
          it is until a daemon that can drives it, or Cancel run ends it.
        </p>
      )}
      {run.outputs_missing && (
        <p class="notice tone-warn" data-testid="run-outputs-missing">
          Its outputs were not all taken: <Coded text={run.outputs_missing.cause} />; <Coded text={run.outputs_missing.fix} />.
        </p>
      )}
      {run.error && (
        <p class="error" role="status">
          Ended by {run.error.kind}: <Coded text={run.error.message} />
        </p>
      )}
      <div class="row actions">
        {!ended && (
          <ConfirmButton
            label="Cancel run"
            question={`Cancel ${run.name}? Every instance it holds is destroyed; this cannot be undone.`}
            confirm="Cancel the run"
            danger
            onConfirm={async () => {
              setRun(await call<Run>('POST', `${path}/cancel`));
              refresh.current();
            }}
          />
        )}
        {run.held && !ended && (
          <ConfirmButton
            label="Resume run"
            question={`Let ${run.name} go on? It was held after a restored backup; it rents again if it needs to.`}
            confirm="Resume"
            onConfirm={async () => {
              setRun(await call<Run>('POST', `${path}/resume`));
              refresh.current();
            }}
          />
        )}
      </div>

      <Section title="Attempts" id="attempts">
        <AttemptTimeline run={run} events={events} now={now} />
      </Section>

      {run.warm && (
        <Section title="Warm instance" id="warm">
          <p class="warm-line">{warmText(run.warm)}</p>
        </Section>
      )}

      {run.instance && (
        <Section title="Instance" id="instance">
          <p>
            Instance {run.instance.id} on machine {run.instance.machine_id ?? '—'}, {run.instance.actual_status ?? 'not listed yet'},{' '}
            {usdPerHour(run.instance.dph_total)}
            {run.instance.ready && ` · ready by ${run.instance.ready.via} ${ago(run.instance.ready.at, now)}`}
            {run.instance.keep_until && ` · ${keptForSshText(run.instance.keep_until)}`}
          </p>
          {sshLines(run).length === 0 ? (
            <p class="muted">No SSH endpoint yet.</p>
          ) : (
            <ul class="ssh">
              {sshLines(run).map(({ line, kind }) => (
                <li>
                  <code>{line}</code> <span class="muted">({kind === 'proxy' ? "the service's proxy" : 'direct to the host'})</span>{' '}
                  <CopyButton text={line} label={line} />
                </li>
              ))}
            </ul>
          )}
        </Section>
      )}

      {run.outputs.length > 0 && (
        <Section title="Outputs" id="outputs">
          {run.outputs.map((o) => (
            <div>
              <p>
                Attempt #{o.attempt}: {o.state}, {o.files.length} {o.files.length === 1 ? 'file' : 'files'}, {o.bytes} bytes{' '}
                {o.state === 'copied' || o.state === 'copying' ? `to ${o.detail ?? 'the cloud'}` : `kept on ${o.host}`}
                {o.detail && o.state !== 'copied' && o.state !== 'copying' && <span class="muted"> ({o.detail})</span>}
              </p>
              {o.files.length > 0 && (
                <table>
                  <thead>
                    <tr>
                      <th>File</th>
                      <th>Bytes</th>
                      <th>sha256</th>
                    </tr>
                  </thead>
                  <tbody>
                    {o.files.map((f) => (
                      <tr>
                        <td>
                          <code>{f.name}</code>
                          {f.partial && <span class="muted"> (partial)</span>}
                        </td>
                        <td>{f.size}</td>
                        <td>
                          <code>{f.sha256.slice(0, 16)}</code>
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </div>
          ))}
          {run.outputs.some((o) => o.files.length > 0) && (
            <p class="muted">
              <code>berth outputs {run.id} DEST</code> copies them out.
            </p>
          )}
        </Section>
      )}

      {endedLogs.length > 0 && (
        <Section title="Last log lines of ended attempts" id="attempt-logs">
          {endedLogs.map((a) => (
            <details open={a.n === endedLogs.at(-1)!.n}>
              <summary>
                Attempt #{a.n} ({a.outcome ?? 'in progress'})
              </summary>
              <LogBox text={a.logs!} label={`Last log lines of attempt ${a.n}`} />
            </details>
          ))}
        </Section>
      )}

      <Section title={live ? 'Output (live)' : 'Container output'} id="output">
        {everRented ? (
          <>
            <p class="muted">
              The last 200 lines of the run's container log (a task's output), every secret scrubbed
              {live && ', shown as the task runs'}.
            </p>
            {!live && (
              <button type="button" onClick={() => void loadLogs()} disabled={logs === 'loading' || !up}>
                {logs === 'loading' ? 'Reading…' : logs ? 'Read again' : 'Show the log'}
              </button>
            )}
            <ErrorNote error={logError} />
            {logs && logs !== 'loading' && (
              <>
                <p class="muted">
                  {logs.source === 'live' ? `Live from instance ${logs.instance_id}` : 'Kept with the last attempt'}
                  {logs.text === '' && ': empty'}
                  {logs.stream && ' (followed over SSH: new lines appear as the task prints them)'}
                </p>
                {logs.text && <LogBox text={logs.text} label="Container output" />}
              </>
            )}
          </>
        ) : (
          <p class="muted" data-testid="no-log">
            {ended ? 'This run ended before it rented an instance: it has no log.' : 'No instance yet: the log comes with the first one.'}
          </p>
        )}
      </Section>

      <Section title="Event log" id="events">
        {/* Newest first: a running run's latest facts are at the top, not below its first hundred events. */}
        <ol class="events" aria-live="polite" aria-label="Events, newest first" reversed>
          {[...events].reverse().map((e) => (
            <li data-type={e.type} data-id={e.id}>
              <time dateTime={e.at} title={localTime(e.at)}>
                {new Date(e.at).toLocaleTimeString()}
              </time>{' '}
              <span class="mono muted">{e.type}</span> <Coded text={e.message} />
              {e.count > 1 && <span class="muted"> (×{e.count})</span>}
            </li>
          ))}
        </ol>
      </Section>
    </>
  );
}
