// Account and health: the daemon (/healthz), the credit and the rate limits met (GET /v1/account),
// `berth doctor`'s checks on demand (they call the service), and the notification deliveries,
// dead ones first (they will not be tried again).
import { useEffect, useState } from 'preact/hooks';
import type { AccountChecks, AccountView, Health, Notification } from '../../wire/control-api.js';
import { call } from '../api.js';
import { ago, duration, localTime, usd } from '../format.js';
import { Coded, ErrorNote, Section, useNow } from '../parts/common.js';
import { useLink } from '../link.js';

const SHOWN = 50;

export function AccountPage() {
  const [health, setHealth] = useState<Health | undefined>(undefined);
  const [account, setAccount] = useState<AccountView | undefined>(undefined);
  const [deliveries, setDeliveries] = useState<Notification[] | undefined>(undefined);
  const [checks, setChecks] = useState<AccountChecks | 'running' | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const now = useNow();
  const [healthAt, setHealthAt] = useState(0);
  const { up } = useLink();

  useEffect(() => {
    let gone = false;
    const load = async () => {
      try {
        const [h, a, dead, pending, delivered] = await Promise.all([
          call<Health>('GET', '/healthz'),
          call<AccountView>('GET', '/v1/account'),
          call<Notification[]>('GET', `/v1/notifications?state=dead&limit=${SHOWN}`),
          call<Notification[]>('GET', `/v1/notifications?state=pending&limit=${SHOWN}`),
          call<Notification[]>('GET', `/v1/notifications?state=delivered&limit=${SHOWN}`),
        ]);
        if (gone) return;
        setHealth(h);
        setHealthAt(Date.now());
        setAccount(a);
        setDeliveries([...dead, ...pending, ...delivered].slice(0, SHOWN));
        setError(undefined);
      } catch (err) {
        if (!gone) setError(err);
      }
    };
    void load();
    const t = setInterval(() => void load(), 10_000);
    return () => {
      gone = true;
      clearInterval(t);
    };
  }, []);

  const runChecks = async () => {
    setChecks('running');
    try {
      setChecks(await call<AccountChecks>('GET', '/v1/account/checks'));
    } catch (err) {
      setChecks(undefined);
      setError(err);
    }
  };

  return (
    <>
      <h1>Account and health</h1>
      <ErrorNote error={error} />
      <div class="summary">
        <div>
          <span class="label">Daemon</span>
          <strong>{health ? (health.ready ? 'serving' : 'resuming runs') : '…'}</strong>
          {health && up && <span class="muted">up {duration(health.uptime_s * 1000 + (now - healthAt))}</span>}
        </div>
        <div>
          <span class="label">Live runs</span>
          <strong>{health?.live_runs ?? '…'}</strong>
          {health && health.held_runs > 0 && <span class="muted">{health.held_runs} held</span>}
        </div>
        <div>
          <span class="label">Credit</span>
          <strong>{account ? usd(account.credit.usd) : '…'}</strong>
          {account && (
            <span class={account.credit.low ? 'error' : 'muted'}>
              {account.credit.low ? 'below' : 'minimum'} {usd(account.credit.min_usd)}
              {account.credit.low && ': no create starts'}
            </span>
          )}
        </div>
      </div>

      <Section title="Doctor checks" id="doctor">
        <p class="muted">
          The checks of <code>berth doctor</code>, made by the daemon with its own key (a few calls to the service).
        </p>
        <button type="button" onClick={() => void runChecks()} disabled={checks === 'running' || !up}>
          {checks === 'running' ? 'Checking…' : 'Run the checks'}
        </button>
        {checks && checks !== 'running' && (
          <ul class="checks">
            {checks.checks.map((c) => (
              <li>
                <span class={`badge tone-${c.ok ? 'good' : 'bad'}`}>{c.ok ? 'ok' : 'failed'}</span> <strong>{c.name}</strong>:{' '}
                <Coded text={c.message} />
              </li>
            ))}
          </ul>
        )}
      </Section>

      <Section title="Rate limits met" id="rate-limits">
        {account && (
          <div class="table-wrap">
            <table class="stack" aria-label="Rate limits met per endpoint group">
              <thead>
                <tr>
                  <th scope="col">Endpoint group</th>
                  <th scope="col" class="num">
                    Rate
                  </th>
                  <th scope="col" class="num">
                    429 answers
                  </th>
                  <th scope="col" class="num">
                    Pauses
                  </th>
                  <th scope="col">Now</th>
                </tr>
              </thead>
              <tbody>
                {account.rate_limits.map((g) => (
                  <tr>
                    <td>{g.group}</td>
                    <td class="num" data-label="Rate">
                      {g.per_s}/s
                    </td>
                    <td class="num" data-label="429 answers">
                      {g.rate_limited}
                    </td>
                    <td class="num" data-label="Pauses">
                      {g.pauses} ({duration(g.paused_ms)})
                    </td>
                    <td data-label="Now">{g.paused ? <span class="badge tone-warn">paused</span> : 'sending'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Section>

      <Section title="Notification deliveries" id="notifications">
        {!deliveries ? (
          <p class="muted">Loading…</p>
        ) : deliveries.length === 0 ? (
          <p class="muted">
            None: no notification was sent (config <code>notify</code>).
          </p>
        ) : (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">State</th>
                  <th scope="col">Event</th>
                  <th scope="col">Run</th>
                  <th scope="col">Target</th>
                  <th scope="col" class="num">
                    POSTs
                  </th>
                  <th scope="col">When</th>
                  <th scope="col">Last error</th>
                </tr>
              </thead>
              <tbody>
                {deliveries.map((d) => (
                  <tr>
                    <td>
                      <span class={`badge tone-${d.state === 'dead' ? 'bad' : d.state === 'pending' ? 'wait' : 'good'}`}>{d.state}</span>
                    </td>
                    <td>{d.type}</td>
                    <td>
                      <a href={`#/runs/${encodeURIComponent(d.run_id)}`} class="mono">
                        {d.run_id}
                      </a>
                    </td>
                    <td>
                      #{d.target} {d.target_origin}
                    </td>
                    <td class="num">{d.attempts}</td>
                    <td>
                      <time dateTime={d.created_at} title={localTime(d.created_at)}>
                        {ago(d.created_at, now)}
                      </time>
                    </td>
                    <td>{d.last_error ?? '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Section>
    </>
  );
}
