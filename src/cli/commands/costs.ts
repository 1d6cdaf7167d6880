// `berth costs [--since DATE] [--json]`: what each run and each of its instances cost, from
// berth's records, beside the service's own charges for the same days where the key may read them.
import type { CostsReport } from '../../wire/control-api.js';
import { usdText } from '../../usd-text.js';
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { printJson, type Io } from '../io.js';
import { table } from '../render.js';

export async function costsCommand(options: { since?: string; json?: boolean }, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const report = await connectToDaemon(env).costs(options.since);
  if (options.json) printJson(io, report);
  else costsLines(report).forEach((l) => io.out(l));
  return EXIT.ok;
}

const money = (x: number | null) => (x === null ? '-' : usdText(x));

export function costsLines(r: CostsReport): string[] {
  const lines = [`Spend from ${r.since} (00:00 UTC) to ${r.until}:`];
  if (r.runs.length === 0) return [...lines, 'No instance billed in this time.'];
  const compared = r.service.compared;
  const header = ['RUN', 'NAME', 'STATE', 'ATTEMPT', 'INSTANCE', 'BERTH', ...(compared ? ['SERVICE', 'DIFF'] : [])];
  const rows: string[][] = [];
  for (const run of r.runs) {
    for (const i of run.instances) {
      rows.push([
        run.id,
        run.name,
        run.state,
        i.warm ? `${i.attempt} (warm)` : String(i.attempt),
        i.instance_id === null ? '(creating)' : String(i.instance_id),
        money(i.usd),
        ...(compared ? [money(i.service_usd), money(i.difference_usd)] : []),
      ]);
    }
    if (run.instances.length > 1) rows.push(['', '', '', '', 'run total', money(run.usd), ...(compared ? ['', ''] : [])]);
  }
  lines.push(...table(header, rows));
  const service =
    compared && r.service.total_usd !== null
      ? `; the service charged ${usdText(r.service.total_usd)} (difference ${usdText(r.total_usd - r.service.total_usd)})`
      : '';
  lines.push('', `Total: ${usdText(r.total_usd)} by berth's records, ${usdText(r.total_usd_per_hour)}/h billing now${service}.`);
  lines.push(`Service charges: ${r.service.note}.`);
  return lines;
}
