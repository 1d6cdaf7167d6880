// The attempt timeline: one bar per attempt from its create to its end (now, while it goes on),
// placed on one time axis, coloured by its outcome and labelled with it in words, with the offer,
// its GPU, machine, price, why it ended and the relax level the offer was found at.
import type { Run, RunEvent } from '../../wire/control-api.js';
import { duration, gpuText, localTime, outcomeTone, usdPerHour } from '../format.js';

/** Each attempt's relax level: that of the last search before it started (the event log's). */
function relaxLevels(events: RunEvent[]): Map<number, number> {
  const levels = new Map<number, number>();
  let level = 0;
  for (const e of events) {
    const data = (e.data ?? {}) as { relaxLevel?: unknown; level?: unknown; n?: unknown };
    if ((e.type === 'search.started' || e.type === 'search.found') && typeof data.relaxLevel === 'number') level = data.relaxLevel;
    if (e.type === 'relaxed' && typeof data.level === 'number') level = data.level;
    if (e.type === 'attempt.started' && typeof data.n === 'number') levels.set(data.n, level);
  }
  return levels;
}

export function AttemptTimeline({ run, events, now }: { run: Run; events: RunEvent[]; now: number }) {
  if (run.attempts.length === 0) return <p class="muted">No attempt yet: nothing was rented.</p>;
  const levels = relaxLevels(events);
  const spans = run.attempts.map((a) => ({
    a,
    from: Date.parse(a.started_at),
    to: a.ended_at ? Date.parse(a.ended_at) : now,
  }));
  const start = Math.min(...spans.map((s) => s.from));
  const end = Math.max(start + 1000, ...spans.map((s) => s.to));
  const pct = (t: number) => ((t - start) / (end - start)) * 100;
  return (
    <ol class="timeline" aria-label="Attempts, oldest first">
      {spans.map(({ a, from, to }) => {
        // The run's current attempt once its task ended: still `running` in the store until the
        // destroy is confirmed, but what goes on is the run's state (collecting its outputs, destroying).
        const after = a.outcome === 'running' && a.n === run.attempt && (run.state === 'collecting' || run.state === 'destroying');
        const outcome = after ? run.state : (a.outcome ?? (a.ended_at ? 'ended' : 'in progress'));
        const tone = after ? 'busy' : outcomeTone(a.outcome);
        const level = levels.get(a.n);
        return (
          <li class="attempt" data-attempt={a.n} data-outcome={outcome}>
            <div class="attempt-head">
              <strong>#{a.n}</strong> <span class={`badge tone-${tone}`}>{outcome}</span>{' '}
              <span class="muted">
                {duration(to - from)} from {localTime(a.started_at)}
              </span>
            </div>
            <div class="track" aria-hidden="true">
              <div class={`bar tone-${tone}`} style={{ left: `${pct(from)}%`, width: `${Math.max(0.8, pct(to) - pct(from))}%` }} />
            </div>
            <dl class="facts">
              <dt>Offer</dt>
              <dd>{a.offer_id}</dd>
              <dt>GPU</dt>
              <dd>{a.gpu_name === null ? '—' : gpuText(a.gpu_name, a.num_gpus)}</dd>
              <dt>Machine</dt>
              <dd>{a.machine_id ?? '—'}</dd>
              <dt>Instance</dt>
              <dd>{a.instance_id ?? 'none made'}</dd>
              <dt>Price</dt>
              <dd>{usdPerHour(a.dph_total)}</dd>
              <dt>Relax level</dt>
              <dd>{level ?? '—'}</dd>
              {a.detail && (
                <>
                  <dt>Why it ended</dt>
                  <dd>{a.detail}</dd>
                </>
              )}
            </dl>
          </li>
        );
      })}
    </ol>
  );
}
