// `berth offers FILE [--set PATH=VALUE]... [--json] [--limit N]`: what a run of this spec would find
// now, before it is submitted. The spec is checked locally first (as `validate` does), then the
// running daemon searches (POST /v1/offers: its defaults, its rate limiter) and answers the offers
// in the order the run would take them, relax steps included, with the price each would bill.
import type { OffersReport } from '../../wire/control-api.js';
import { usdText } from '../../usd-text.js';
import { ControlApiError, connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { printJson, type Io } from '../io.js';
import { table } from '../render.js';
import { checkGpuNames } from '../gpu-name-list.js';
import { readSpecFile, SpecFileError } from '../spec-file.js';

export interface OffersOptions {
  set?: string[];
  json?: boolean;
  /** At most this many offers shown (default 20; with --json, every offer unless given); the counts per level are always whole. */
  limit?: number;
}

const DEFAULT_LIMIT = 20;

export async function offersCommand(file: string, options: OffersOptions, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const spec = readSpecFile(file, options.set ?? []);
  await checkGpuNames(file, spec, io, env);
  const report = await connectToDaemon(env)
    .offers(spec)
    .catch((err: unknown) => {
      // The daemon validates again with its own defaults: its problems are reported against the file.
      if (err instanceof ControlApiError && err.kind === 'spec')
        throw new SpecFileError(file, err.issues.length > 0 ? err.issues : [{ path: '$', message: err.message }]);
      throw err;
    });
  // --json is for programs: the whole report, unless --limit asks for fewer offers (issue #50).
  if (options.json) printJson(io, options.limit === undefined ? report : { ...report, offers: report.offers.slice(0, options.limit) });
  else offersLines(report, options.limit ?? DEFAULT_LIMIT).forEach((l) => io.out(l));
  return EXIT.ok;
}

export function offersLines(r: OffersReport, limit: number): string[] {
  const lines: string[] = [];
  const shown = r.offers.slice(0, limit);
  if (shown.length === 0) lines.push(`No usable offer now at max_price_per_hour ${usdText(r.max_price_per_hour)}, whatever relax level.`);
  else {
    lines.push(
      ...table(
        ['#', 'LEVEL', 'OFFER', 'MACHINE', 'GPU', 'VRAM', 'BILLED/H', 'RELIABILITY', 'WHERE'],
        shown.map((o, i) => [
          String(i + 1),
          String(o.level),
          String(o.id),
          String(o.machine_id),
          `${o.num_gpus}x ${o.gpu_name}`,
          `${o.gpu_ram} MB`,
          usdText(o.billed_usd_per_hour),
          o.reliability === null ? '-' : o.reliability.toFixed(3),
          o.geolocation ?? '-',
        ]),
      ),
    );
    if (r.offers.length > shown.length) lines.push(`(${r.offers.length - shown.length} more; --limit N shows more)`);
  }
  lines.push(
    '',
    `Billed/h is what the instance would bill, ${r.disk_gb} GB of disk included, checked against max_price_per_hour ${usdText(r.max_price_per_hour)} (${r.search_type}).`,
    'VRAM is each GPU\'s memory as the card lists it, in MB (MiB): a card sold as 16 GB lists from 15259 (a Tesla T4: 15360); ask for it as gpu_ram: {gte: "16GB"}.',
    'Searches, in the order a run makes them:',
  );
  for (const l of r.levels) {
    const what = l.level === 0 ? 'level 0 (the spec as written)' : `level ${l.level} (${l.step})`;
    lines.push(
      l.searched
        ? `  ${what}: ${l.returned} returned, ${l.over_cap} above the price cap, ${l.added} usable new`
        : `  ${what}: not searched`,
    );
  }
  if (r.note) lines.push(`Note: ${r.note}.`);
  return lines;
}
