// Text for people: aligned tables, durations, the run detail view, the live progress line and the
// SSH command. Pure functions from data (and `now`) to lines, so every command renders alike.
import { countText } from '../count-text.js';
import { usdText } from '../usd-text.js';
import { shownName } from './shown-name.js';
import type { SpecIssue } from '../errors.js';
import type { Run, RunAttempt, RunEvent, RunInstance, RunOutputsMissing } from '../wire/control-api.js';
import { isEndState, keptForSshText, keptRunNeeds } from '../wire/run-states.js';

const DASH = '-';

/** `850ms`, `12s`, `3m 05s`, `2h 07m`. */
export function formatDuration(ms: number): string {
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** Columns padded to their widest cell; the last column is not padded, so lines carry no trailing blanks. */
export function table(header: string[], rows: string[][]): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd(),
  );
}

/** The SSH line to use: the first endpoint that answered, else the listed proxy. */
export function sshCommand(instance: RunInstance | null): string | null {
  return sshCommands(instance)[0] ?? null;
}

/** One SSH line per endpoint that answered (both when both did), else the listed proxy's. */
function sshCommands(instance: RunInstance | null): string[] {
  if (!instance) return [];
  const answered = instance.ssh ?? [];
  if (answered.length > 0) return answered.map((e) => `ssh -p ${e.port} root@${e.host} (${e.kind})`);
  if (!instance.ssh_host || !instance.ssh_port) return [];
  return [`ssh -p ${instance.ssh_port} root@${instance.ssh_host}`];
}

/** The instance runs by the list, but the run still waits for its SSH to answer. */
function waitingForSsh(run: Run): boolean {
  return run.state === 'booting' && run.instance?.actual_status === 'running' && !run.instance.ready;
}

const READY_VIA = { ssh: 'SSH answered', status: 'the service said running', callback: 'its onstart called back' } as const;

/** `SSH answered 1.2 s after it was listed running`: how the run learned the instance was ready. */
export function readyText(ready: NonNullable<RunInstance['ready']>): string {
  const after =
    ready.via === 'ssh' && ready.after_running_s !== null ? ` ${ready.after_running_s.toFixed(1)} s after it was listed running` : '';
  return `${READY_VIA[ready.via]}${after} (${ready.at})`;
}

/** One line when an attempt becomes ready, e.g. `attempt 2: SSH reachable after 1.0 s at 127.0.0.1:4022 (proxy)`. */
export function attemptReadyLine(run: Run): string | null {
  const ready = run.instance?.ready;
  if (!ready) return null;
  const where = (run.instance!.ssh ?? []).map((e) => `${e.host}:${e.port} (${e.kind})`).join(', ');
  const how =
    ready.via === 'ssh'
      ? `SSH reachable after ${(ready.after_running_s ?? 0).toFixed(1)} s`
      : ready.via === 'callback'
        ? 'ready: its onstart called back'
        : 'ready: the service says running';
  return `attempt ${run.attempt}: ${how}${where ? ` at ${where}` : ''}`;
}

const since = (iso: string, now: number) => formatDuration(now - Date.parse(iso));

/**
 * When a booting instance is given up (boot_timeout_s), as the rest of a line; '' when it is ready,
 * or the run is past booting (a `destroying` run gives nothing up: issue #50).
 */
function bootDeadlineText(run: Run, now: number): string {
  const at = run.instance?.boot_deadline;
  if (!at || (run.state !== 'creating' && run.state !== 'booting')) return '';
  const left = Date.parse(at) - now;
  return left > 0 ? `given up in ${formatDuration(left)} if not ready` : 'given up now: past its boot deadline';
}
/** What the run cost: so far and per hour now while it may bill, its total once it ended. */
function costText(run: Run): string {
  if (!run.cost) return DASH;
  if (isEndState(run.state)) return usdText(run.cost.usd);
  return `${usdText(run.cost.usd)} so far, ${usdText(run.cost.usd_per_hour)}/h now`;
}
const clock = (iso: string) => new Date(iso).toLocaleTimeString('en-GB', { hour12: false });
const price = (dph: number | null) => (dph === null ? DASH : `$${dph.toFixed(3)}/h`);
const text = (v: unknown) => (v === null || v === undefined ? DASH : String(v));

/** A task's exit code once it ended (0 for a run that succeeded); a dash otherwise. */
function exitText(run: Run): string {
  if (run.state === 'succeeded') return '0';
  return run.error?.exit_code === undefined ? DASH : String(run.error.exit_code);
}

/** A column of the runs table; `drop` orders which go first when the terminal is narrow (0: never). */
interface RunsColumn {
  head: string;
  cell: (r: Run, now: number) => string;
  drop: number;
}

const RUNS_COLUMNS: RunsColumn[] = [
  { head: 'RUN', cell: (r) => r.id, drop: 0 },
  { head: 'NAME', cell: (r) => r.name, drop: 0 },
  {
    head: 'STATE',
    cell: (r) =>
      r.held
        ? `${r.state} (held)`
        : r.unreadable
          ? `${r.state} (kept)`
          : r.outputs_missing
            ? `${r.state} (${outputsMissingWords(r.outputs_missing)})`
            : r.state,
    drop: 0,
  },
  { head: 'EXIT', cell: (r) => exitText(r), drop: 4 },
  // Why an ended run failed or expired (its error's kind: no_offers, task_failed, budget, ...).
  { head: 'REASON', cell: (r) => r.error?.kind ?? DASH, drop: 3.5 },
  { head: 'ATTEMPT', cell: (r) => String(r.attempt), drop: 3 },
  { head: 'INSTANCE', cell: (r) => text(r.instance?.id), drop: 1 },
  { head: 'STATUS', cell: (r) => text(r.instance?.actual_status), drop: 2 },
  { head: 'PRICE', cell: (r) => price(r.instance?.dph_total ?? null), drop: 6 },
  { head: 'COST', cell: (r) => (r.cost ? usdText(r.cost.usd) : DASH), drop: 0 },
  { head: 'AGE', cell: (r, now) => since(r.created_at, now), drop: 5 },
];

/** The shortest a NAME is cut to (with `…`) before a column of more worth is dropped. */
const NAME_MIN = 8;

/**
 * Every run, one line each, fitted to `width` columns (a terminal's; unbounded for pipes): the
 * columns that matter least go first (INSTANCE, STATUS, ATTEMPT, EXIT, AGE, PRICE), and long
 * names are cut with `…`, so that RUN, NAME, STATE and COST always show.
 */
export function runsTable(runs: Run[], now: number, width = Infinity): string[] {
  if (runs.length === 0) return ['No runs yet: submit one with `berth submit FILE`.'];
  const dropOrder = RUNS_COLUMNS.filter((c) => c.drop > 0).sort((a, b) => a.drop - b.drop);
  let columns = RUNS_COLUMNS;
  let nameMax = Infinity;
  const render = () => {
    const cut = (s: string) => (s.length > nameMax ? `${s.slice(0, nameMax - 1)}…` : s);
    const rows = runs.map((r) => columns.map((c) => (c.head === 'NAME' ? cut(c.cell(r, now)) : c.cell(r, now))));
    return table(
      columns.map((c) => c.head),
      rows,
    );
  };
  let lines = render();
  const tooWide = () => lines.some((l) => l.length > width);
  for (const column of dropOrder) {
    if (!tooWide()) break;
    // Before PRICE goes, a long NAME is cut short.
    if (column.head === 'PRICE') {
      const over = Math.max(...lines.map((l) => l.length)) - width;
      const longest = Math.max(...runs.map((r) => r.name.length));
      nameMax = Math.max(NAME_MIN, longest - over);
      lines = render();
      if (!tooWide()) break;
    }
    columns = columns.filter((c) => c !== column);
    lines = render();
  }
  if (tooWide()) {
    nameMax = NAME_MIN;
    lines = render();
  }
  lines.push('', totalLine(runs));
  if (runs.some((r) => r.held)) lines.push('', HELD_HINT);
  if (runs.some((r) => r.unreadable)) lines.push('', KEPT_HINT);
  return lines;
}

/** What the runs listed cost in all, and what they bill now. */
function totalLine(runs: Run[]): string {
  const usd = runs.reduce((s, r) => s + (r.cost?.usd ?? 0), 0);
  const perHour = runs.reduce((s, r) => s + (r.cost?.usd_per_hour ?? 0), 0);
  const by = runs.length === 1 ? 'this run' : `these ${runs.length} runs`;
  return `Total: ${usdText(usd)} spent by ${by}; ${usdText(perHour)}/h billing now.`;
}

const HELD_HINT =
  '(held): the store was restored from a backup and what became of the run since is unknown; nothing is rented for it until `berth resume RUN`, or `berth cancel RUN`.';

const KEPT_HINT =
  '(kept): this berth cannot read the run (a later berth stored it, or its spec no longer passes): it is not driven here and its instance is left as it is; `berth status RUN` says what it needs, `berth cancel RUN` ends it.';

/** Everything about one run: where it stands, how to connect, and every attempt with its outcome. */
export function runDetail(run: Run, now: number): string[] {
  const inst = run.instance;
  const fields: string[][] = [
    ['Run', `${run.id} (${run.name})`],
    ['State', `${run.state} (attempt ${run.attempt}, relax level ${run.relax_level})`],
    ['Created', `${run.created_at} (${since(run.created_at, now)} ago)`],
    ['Updated', `${run.updated_at} (${since(run.updated_at, now)} ago)`],
    [
      'Instance',
      inst
        ? `${inst.id} on offer ${inst.offer_id} (machine ${text(inst.machine_id)}): ${text(inst.actual_status)}, ${price(inst.dph_total)}`
        : DASH,
    ],
    ...sshFields(run),
    ['Cost', costText(run)],
  ];
  if (inst?.ready) fields.push(['Ready', readyText(inst.ready)]);
  const boot = bootDeadlineText(run, now);
  if (boot) fields.push(['Boot', `${boot} (at ${inst!.boot_deadline}, boot_timeout_s); the next offer is rented then`]);
  if (inst?.keep_until)
    fields.push([
      'Kept',
      `${keptForSshText(inst.keep_until)}: \`berth ssh ${run.id}\` to look around, billing meanwhile; \`berth cancel ${run.id}\` destroys it now`,
    ]);
  if (run.warm)
    fields.push([
      'Warm',
      run.warm.state === 'warm'
        ? `instance ${run.warm.instance_id} kept running for the next run of this spec until ${clock(run.warm.until)} (warm.idle_s), ${price(run.warm.usd_per_hour)} meanwhile; \`berth cancel ${run.id}\` destroys it now`
        : `instance ${run.warm.instance_id} no longer kept warm: being destroyed (${price(run.warm.usd_per_hour)} until it is gone)`,
    ]);
  if (run.held)
    fields.push(['Held', `restored from a backup: \`berth resume ${run.id}\` lets it go on, \`berth cancel ${run.id}\` ends it`]);
  if (run.unreadable)
    fields.push([
      'Kept',
      `this berth cannot drive it (${run.unreadable.reason}): it needs ${keptRunNeeds(run.unreadable)}; its instance is left as it is until one drives it, or \`berth cancel ${run.id}\` ends it`,
    ]);
  if (run.error) fields.push(['Error', `${run.error.kind}: ${run.error.message}`]);
  if (run.outputs_missing) fields.push(['Outputs', `NOT ALL TAKEN: ${run.outputs_missing.cause}; ${run.outputs_missing.fix}`]);
  const lines = table(['', ''], fields).slice(1);
  lines.push(
    '',
    run.attempts.length > 0
      ? 'Attempts:'
      : isEndState(run.state)
        ? 'Attempts: none (it ended before it rented an instance)'
        : 'Attempts: none yet',
  );
  if (run.attempts.length > 0) lines.push(...attemptsTable(run.attempts, now).map((l) => `  ${l}`));
  lines.push(...outputsLines(run));
  for (const a of run.attempts) {
    if (!a.logs) continue;
    lines.push('', `Last log lines of attempt ${a.n} (instance ${text(a.instance_id)}, ${a.outcome ?? 'ending'}):`);
    lines.push(...a.logs.split('\n').map((l) => `  | ${l}`));
  }
  return lines;
}

/** A task's outputs, per attempt that took them: the files with their sizes, and where they are. */
function outputsLines(run: Run): string[] {
  const lines: string[] = [];
  for (const o of run.outputs) {
    const where = o.state === 'copied' || o.state === 'copying' ? `to ${o.detail ?? 'the cloud'}` : `on ${o.host}`;
    lines.push('', `Outputs of attempt ${o.attempt}: ${o.state}, ${countText(o.files.length, 'file')}, ${o.bytes} bytes ${where}`);
    if (o.detail && o.state !== 'copied' && o.state !== 'copying') lines.push(`  (${o.detail})`);
    if (o.files.length > 0)
      lines.push(
        ...table(
          ['NAME', 'BYTES', 'SHA256'],
          o.files.map((f) => [`${shownName(f.name)}${f.partial ? ' (partial)' : ''}`, String(f.size), f.sha256.slice(0, 16)]),
        ).map((l) => `  ${l}`),
      );
  }
  if (run.outputs.some((o) => o.files.length > 0)) lines.push(`  berth outputs ${run.id} DEST copies them out`);
  return lines;
}

/** The SSH line(s): every endpoint that answered, or where the run waits for one. */
function sshFields(run: Run): string[][] {
  const inst = run.instance;
  if (waitingForSsh(run)) {
    return [['SSH', `waiting for SSH${inst!.ssh_host && inst!.ssh_port ? ` at ${inst!.ssh_host}:${inst!.ssh_port}` : ''} to answer`]];
  }
  const commands = sshCommands(inst);
  if (commands.length === 0) return [['SSH', DASH]];
  return commands.map((c, i) => [i === 0 ? 'SSH' : '', c]);
}

function attemptsTable(attempts: RunAttempt[], now: number): string[] {
  const rows = attempts.map((a) => [
    String(a.n),
    text(a.offer_id),
    text(a.machine_id),
    text(a.instance_id),
    a.outcome ?? '(in progress)',
    clock(a.started_at),
    formatDuration((a.ended_at ? Date.parse(a.ended_at) : now) - Date.parse(a.started_at)),
    a.detail ?? '',
  ]);
  return table(['#', 'OFFER', 'MACHINE', 'INSTANCE', 'OUTCOME', 'STARTED', 'TOOK', 'DETAIL'], rows);
}

/** The live status line: state, attempt, offer, instance status, elapsed. */
export function progressLine(run: Run, now: number): string {
  const boot = bootDeadlineText(run, now);
  return `${progressKey(run)}  ${since(run.created_at, now)}${boot ? `  (${boot})` : ''}${run.instance?.keep_until ? `  (${keptForSshText(run.instance.keep_until)})` : ''}`;
}

/** The progress line without the clock: it changes only when the run does (non-TTY output prints on change). */
export function progressKey(run: Run): string {
  const parts = [run.id, run.state.padEnd(10), `attempt ${run.attempt}`];
  const current = run.attempts.find((a) => a.n === run.attempt);
  const offer = run.instance?.offer_id ?? current?.offer_id;
  if (offer !== undefined && offer !== null) parts.push(`offer ${offer}`);
  if (run.instance) parts.push(`instance ${run.instance.id}${run.instance.actual_status ? ` ${run.instance.actual_status}` : ''}`);
  if (waitingForSsh(run)) parts.push('waiting for SSH');
  return parts.join('  ');
}

/** One line when an attempt ends, e.g. `attempt 1 on offer 812 (machine 40): exited, instance destroyed`. */
export function attemptEndedLine(a: RunAttempt): string {
  const where = a.offer_id === null ? '' : ` on offer ${a.offer_id}${a.machine_id === null ? '' : ` (machine ${a.machine_id})`}`;
  return `attempt ${a.n}${where}: ${a.outcome ?? 'ended'}${a.detail ? ` (${a.detail})` : ''}`;
}

export function eventLine(e: RunEvent): string {
  const repeated = e.count !== undefined && e.count > 1 ? ` (${e.count} times since ${e.first_at ?? '?'})` : '';
  return `${e.at}  ${e.type.padEnd(18)}  ${e.message}${repeated}`;
}

/** The header sentence and one indented line per problem, each with its JSON path. */
export function specProblems(file: string, issues: SpecIssue[]): string[] {
  const n = issues.length;
  return [`${file} is not a valid job spec (${n} problem${n === 1 ? '' : 's'}):`, ...issues.map((i) => `  ${i.path}: ${i.message}`)];
}

/** The outputs mark in a few words (a table's STATE cell): `outputs partial`. */
function outputsMissingWords(m: Pick<RunOutputsMissing, 'state'>): string {
  return `outputs ${m.state.replace('_', ' ')}`;
}

/** An ended run whose outputs were not all taken, as one sentence: why, and what to do. */
export function outputsMissingSentence(run: Run): string | null {
  const m = run.outputs_missing;
  return m ? `Its outputs were not all taken (${outputsMissingWords(m)}): ${m.cause}; ${m.fix}.` : null;
}

/** Why a followed run stopped short of `running`, as one sentence for stderr. */
export function runEndedSentence(run: Run): string {
  if (!run.error) return `Run ${run.id} ${endedWords(run.state)}.`;
  return `Run ${run.id} ${run.state}: ${run.error.message}`;
}

/** `succeeded`, `was cancelled`, `is running`: a run's state as the rest of a sentence that starts with the run. */
export function endedWords(state: Run['state']): string {
  switch (state) {
    case 'succeeded':
    case 'failed':
    case 'expired':
      return state;
    case 'cancelled':
      return 'was cancelled';
    default:
      return `is ${state}`;
  }
}
