// Money: where it went (spend per day and per run over the last 7 days, from GET /v1/costs), what
// bills now, how close the daemon-wide caps are (GET /v1/account), and the service's own charges
// beside berth's figures where the key may read them. berth's figures follow the runs' events
// (service=false: no call to the service); the service's charges are read when asked, since each
// read is a call against the account's rate limit.
import { useEffect, useState } from 'preact/hooks';
import type { AccountView, CostsReport } from '../../wire/control-api.js';
import { call, followEvents } from '../api.js';
import { usd, usdPerHour } from '../format.js';
import { BarChart } from '../parts/bar-chart.js';
import { ErrorNote, Section } from '../parts/common.js';

const DAYS = 7;

function sinceDay(): string {
  return new Date(Date.now() - (DAYS - 1) * 86_400_000).toISOString().slice(0, 10);
}

function CapLine({ name, used, cap, unit }: { name: string; used: number; cap: number | null | undefined; unit: (n: number) => string }) {
  if (cap === null || cap === undefined)
    return (
      <li>
        <strong>{name}</strong>: no cap set; {unit(used)} now
      </li>
    );
  const pct = Math.min(100, (100 * used) / cap);
  return (
    <li>
      <strong>{name}</strong>: {unit(used)} of {unit(cap)} ({pct.toFixed(0)}%)
      <progress max={100} value={pct} aria-label={`${name}: ${pct.toFixed(0)}% of the cap`} />
    </li>
  );
}

export function MoneyPage() {
  const [report, setReport] = useState<CostsReport | undefined>(undefined);
  const [account, setAccount] = useState<AccountView | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [compared, setCompared] = useState<{ report: CostsReport; at: number } | 'reading' | undefined>(undefined);
  const readService = async () => {
    setCompared('reading');
    try {
      setCompared({ report: await call<CostsReport>('GET', `/v1/costs?since=${sinceDay()}`), at: Date.now() });
    } catch (err) {
      setCompared(undefined);
      setError(err);
    }
  };

  useEffect(() => {
    let gone = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = () => {
      timer = undefined;
      call<CostsReport>('GET', `/v1/costs?since=${sinceDay()}&service=false`).then(
        (r) => !gone && setReport(r),
        (err: unknown) => !gone && setError(err),
      );
      call<AccountView>('GET', '/v1/account').then(
        (a) => !gone && setAccount(a),
        () => undefined,
      );
    };
    load();
    // Spend moves with the runs: read again after their events (at most every 2 s), and every 30 s.
    const stop = followEvents({}, () => (timer ??= setTimeout(load, 2000)));
    const tick = setInterval(load, 30_000);
    return () => {
      gone = true;
      stop();
      clearInterval(tick);
      if (timer) clearTimeout(timer);
    };
  }, []);

  return (
    <>
      <h1>Money</h1>
      <ErrorNote error={error} />
      {!report ? (
        <p class="notice">Loading…</p>
      ) : (
        <>
          <div class="summary">
            <div>
              <span class="label">Spent in the last {DAYS} days</span>
              <strong data-testid="total-spend">{usd(report.total_usd, 4)}</strong>
            </div>
            <div>
              <span class="label">Billing now</span>
              <strong>{usdPerHour(report.total_usd_per_hour)}</strong>
            </div>
            {compared && compared !== 'reading' && compared.report.service.compared && (
              <div>
                <span class="label">The service's charges</span>
                <strong>{usd(compared.report.service.total_usd, 4)}</strong>
              </div>
            )}
          </div>
          <Section title="Caps" id="caps">
            {account ? (
              <ul class="caps">
                <CapLine
                  name="$/h of live instances (budget.max_usd_per_hour)"
                  used={account.money.usd_per_hour}
                  cap={account.money.max_usd_per_hour}
                  unit={usdPerHour}
                />
                <CapLine
                  name="Spend in the last 24 h (budget.max_usd_per_day)"
                  used={account.money.usd_last_24h}
                  cap={account.money.max_usd_per_day}
                  unit={(n) => usd(n, 2)}
                />
              </ul>
            ) : (
              <p class="muted">Reading the caps…</p>
            )}
          </Section>
          <Section title="Spend per day (UTC)" id="per-day">
            <BarChart
              id="chart-days"
              title={`Spend per UTC day, the last ${DAYS} days`}
              bars={report.days.map((d) => ({ label: d.day, value: d.usd, text: usd(d.usd, 4) }))}
            />
          </Section>
          <Section title="Spend per run" id="per-run">
            {report.runs.length === 0 ? (
              <p class="muted">No run has spent anything in these days.</p>
            ) : (
              <BarChart
                id="chart-runs"
                title={`Spend per run, the last ${DAYS} days`}
                bars={[...report.runs]
                  .sort((a, b) => b.usd - a.usd)
                  .slice(0, 30)
                  // The id beside the name: several runs may share one name (a spec submitted again).
                  .map((r) => ({
                    label: `${r.name} (${r.id})`,
                    value: r.usd,
                    text: usd(r.usd, 4),
                    href: `#/runs/${encodeURIComponent(r.id)}`,
                  }))}
              />
            )}
          </Section>
          <Section title="berth's figures and the service's" id="service">
            <p class="muted">
              Reading the service's charges is a call to the service (against the account's rate limit), so it is made when asked.
            </p>
            <button type="button" onClick={() => void readService()} disabled={compared === 'reading'}>
              {compared === 'reading' ? 'Reading…' : compared ? "Read the service's charges again" : "Read the service's charges"}
            </button>
            {compared && compared !== 'reading' && <ServiceComparison report={compared.report} at={compared.at} />}
          </Section>
        </>
      )}
    </>
  );
}

function ServiceComparison({ report, at }: { report: CostsReport; at: number }) {
  return (
    <>
      <p>
        {report.service.note} (read at {new Date(at).toLocaleTimeString()}).
      </p>
      {report.service.compared && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Attempt</th>
                <th scope="col">Instance</th>
                <th scope="col" class="num">
                  berth
                </th>
                <th scope="col" class="num">
                  service
                </th>
                <th scope="col" class="num">
                  difference
                </th>
              </tr>
            </thead>
            <tbody>
              {report.runs.flatMap((r) =>
                r.instances.map((i) => (
                  <tr>
                    <td>{r.name}</td>
                    <td>#{i.attempt}</td>
                    <td>{i.instance_id ?? '—'}</td>
                    <td class="num">{usd(i.usd, 4)}</td>
                    <td class="num">{usd(i.service_usd, 4)}</td>
                    <td class="num">{usd(i.difference_usd, 4)}</td>
                  </tr>
                )),
              )}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
