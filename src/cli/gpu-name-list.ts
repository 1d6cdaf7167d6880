// The GPU names the service knows, for the local check of `validate`, `submit` and `offers`
// (../job-spec/gpu-names.ts). The official client reads them the same way: `GET
// /api/v0/gpu_names/unique/` without a key, cached for 24 hours (vast-ai/vast-cli, vast.py
// `_get_gpu_names`: CACHE_DURATION = timedelta(hours=24), `requests.get(url, headers={})`; also
// vastai/cli/util.py). berth caches the list in BERTH_HOME/gpu-names.json for a day, per base URL.
// A service that cannot be reached never fails the check: the names are then not checked, and the
// caller says so (a warning). A 429 is asked again once, after the interval it names.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { berthHome } from '../config/home.js';
import { loadConfig } from '../config/load.js';
import { unknownGpuNameIssues, gpuNamesIn } from '../job-spec/gpu-names.js';
import { parseJobSpec } from '../job-spec/validate.js';
import type { Io } from './io.js';
import { placeIssuesInFile, SpecFileError } from './spec-file.js';

const DAY_MS = 24 * 3600 * 1000;
/** The check must not hold up `validate` for long: a service that does not answer by then is skipped. */
const FETCH_TIMEOUT_MS = 5000;
const CACHE_FILE = 'gpu-names.json';

type Names = { ok: true; names: string[] } | { ok: false; why: string };

interface Cached {
  base_url: string;
  fetched_at: number;
  gpu_names: string[];
}

function readCache(home: string, baseUrl: string, now: number): string[] | undefined {
  try {
    const c = JSON.parse(readFileSync(join(home, CACHE_FILE), 'utf8')) as Partial<Cached>;
    const fresh = typeof c.fetched_at === 'number' && now - c.fetched_at < DAY_MS && now >= c.fetched_at;
    if (c.base_url === baseUrl && fresh && Array.isArray(c.gpu_names) && c.gpu_names.every((n) => typeof n === 'string'))
      return c.gpu_names;
  } catch {
    // No cache yet, or an unreadable one: fetched again.
  }
  return undefined;
}

function writeCache(home: string, cached: Cached): void {
  try {
    const file = join(home, CACHE_FILE);
    writeFileSync(`${file}.tmp`, JSON.stringify(cached), { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
  } catch {
    // A home that cannot be written (not made yet, read-only): the list is fetched again next time.
  }
}

/**
 * How long to wait before asking again after a 429: the service enforces a minimum interval between
 * requests and its 429 may name the rate (`threshold=2.0`, per second: rate-limits-and-errors.mdx,
 * service-facts "Rate limits"), never a Retry-After. 1/threshold s, 1 s when it names none, at most
 * RETRY_MAX_MS (validate is not to hang on a strange figure).
 */
function rateLimitPauseMs(body: string): number {
  let text = body;
  try {
    const o = JSON.parse(body) as { detail?: unknown; msg?: unknown };
    text = [o.detail, o.msg].filter((v) => typeof v === 'string').join(' ') || body;
  } catch {
    // Plain text (`API requests too frequent`), as the service often answers.
  }
  const m = /threshold\s*=\s*(\d+(?:\.\d+)?|\.\d+)/i.exec(text);
  const threshold = m ? Number(m[1]) : NaN;
  return Number.isFinite(threshold) && threshold > 0 ? Math.min(RETRY_MAX_MS, Math.ceil(1000 / threshold)) : 1000;
}

const RETRY_MAX_MS = 5000;

/** The service's GPU names, from the day-old cache or the service; `ok: false` with why when neither answers. */
async function knownGpuNames(env: NodeJS.ProcessEnv, now = Date.now()): Promise<Names> {
  let baseUrl: string;
  try {
    // The base URL the daemon would use: the config's default, or BERTH_API_URL (src/config/load.ts).
    baseUrl = loadConfig({}, env).config.service.base_url.replace(/\/+$/, '');
  } catch (err) {
    return { ok: false, why: `the service's address could not be read (${(err as Error).message})` };
  }
  const home = berthHome(env);
  const cached = readCache(home, baseUrl, now);
  if (cached) return { ok: true, names: cached };
  const url = `${baseUrl}/api/v0/gpu_names/unique/`;
  try {
    let res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    if (res.status === 429) {
      // Asked once more after the interval the 429 names (issue #50): a second later it answers.
      await sleep(rateLimitPauseMs(await res.text().catch(() => '')));
      res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    }
    if (!res.ok) return { ok: false, why: `${url} answered ${res.status}${res.status === 429 ? ' twice' : ''}` };
    const body = (await res.json()) as { gpu_names?: unknown };
    const names = body.gpu_names;
    if (!Array.isArray(names) || names.length === 0 || !names.every((n) => typeof n === 'string'))
      return { ok: false, why: `${url} answered no list of GPU names` };
    writeCache(home, { base_url: baseUrl, fetched_at: now, gpu_names: names });
    return { ok: true, names };
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
    return { ok: false, why: `${baseUrl} could not be reached (${cause})` };
  }
}

/**
 * Checks the GPU names of a spec read by readSpecFile against the service's list: a name it does
 * not know is a spec problem (SpecFileError, exit 2) naming the nearest known one; when the list
 * cannot be had, a warning on stderr and nothing else. A spec that names no GPU costs no call.
 */
export async function checkGpuNames(file: string, spec: unknown, io: Io, env: NodeJS.ProcessEnv): Promise<void> {
  const parsed = parseJobSpec(spec);
  if (gpuNamesIn(parsed).length === 0) return;
  const known = await knownGpuNames(env);
  if (!known.ok) {
    io.err(`Warning: the GPU names of ${file} were not checked: ${known.why}.`);
    return;
  }
  const issues = unknownGpuNameIssues(parsed, known.names);
  if (issues.length > 0) throw new SpecFileError(file, placeIssuesInFile(file, issues));
}
