// The wrapper berth sends as a task's onstart (issue #19): the user's onstart, the readiness
// callback line (when configured), then the task itself:
//
//   1. a backstop (when the run has a limit): a background `sleep` that destroys the instance with
//      its own key (CONTAINER_API_KEY) once the run's limit has passed by a grace period, whatever
//      became of the daemon;
//   2. the `run` command, as `sh -c '<run>'`, stdin closed, stderr joined to stdout, so its output
//      is the container's log;
//   3. the end marker, a line of its own in that log: `berth-task-end run=<run id> attempt=<n>
//      exit=<code>`. Only the task's end writes it: an outbid, a host that failed or a user's stop
//      leaves none, so the daemon never decides a task's end on a status alone;
//   4. a stop of its own instance with its own key (manage_instance `{"state": "stopped"}`): the
//      daemon sees `intended_status: stopped` (which berth never sets) in the lists it already
//      makes, reads the marker through the logs endpoint, records the end and destroys the instance.
//      It stops rather than destroys so that the log (and the exit code in it) can still be read.
//
// The daemon needs no way in: the container calls out to the service only, as the service's docs
// allow ("You can also stop or destroy the instance from within", docker-environment.mdx).
import { ONSTART_MAX_CHARS, onstartFits } from './onstart.js';

export interface TaskScriptInput {
  /** The user's onstart script, run first (as it is: the wrapper is compressed as a whole when long). */
  onstart?: string | undefined;
  /** The readiness callback line, run once onstart has run. */
  callbackLine?: string | undefined;
  run: string;
  runId: string;
  n: number;
  /** The service's base URL, as berth's client uses it (`service.base_url`). */
  serviceUrl: string;
  /** Seconds after the container starts when it destroys itself; null: no backstop. */
  backstopS: number | null;
}

/** The marker's prefix; a line of the container's log matching MARKER is the task's end. */
export const MARKER_PREFIX = 'berth-task-end';
const MARKER = /^berth-task-end run=([a-z2-7]+) attempt=(\d+) exit=(\d{1,3})\s*$/;

/** `text` as one single-quoted sh word. */
function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The shell function that stops or destroys the container's own instance with its own key (curl, else wget). */
function selfCall(serviceUrl: string): string {
  const base = shellQuote(serviceUrl.replace(/\/+$/, ''));
  return [
    'berth_self() {',
    `  berth_u=${base}"/api/v0/instances/$CONTAINER_ID/"`,
    `  if [ "$1" = stop ]; then berth_m=PUT; berth_d='{"state":"stopped"}'; else berth_m=DELETE; berth_d='{}'; fi`,
    '  if command -v curl >/dev/null 2>&1; then',
    `    curl -fsS -m 20 --retry 5 --retry-connrefused --retry-max-time 120 -X "$berth_m" -H "Authorization: Bearer $CONTAINER_API_KEY" -H 'Content-Type: application/json' --data "$berth_d" "$berth_u"`,
    '  else',
    `    wget -q -O /dev/null -T 20 -t 5 --method="$berth_m" --header="Authorization: Bearer $CONTAINER_API_KEY" --header='Content-Type: application/json' --body-data="$berth_d" "$berth_u"`,
    '  fi >/dev/null 2>&1',
    '}',
  ].join('\n');
}

/** The whole script, before any compression (run-actors encodes it with encodeOnstart). */
export function taskScript(input: TaskScriptInput): string {
  const parts: string[] = [];
  if (input.onstart) parts.push(input.onstart, '');
  if (input.callbackLine) parts.push(input.callbackLine);
  parts.push(`# berth task: run ${input.runId}, attempt ${input.n}`);
  parts.push(selfCall(input.serviceUrl));
  if (input.backstopS !== null) {
    parts.push(
      `( sleep ${Math.ceil(input.backstopS)}; echo 'berth: the run limit passed; destroying this instance'; berth_self destroy ) &`,
    );
  }
  parts.push(`sh -c ${shellQuote(input.run)} </dev/null 2>&1`);
  parts.push('berth_rc=$?');
  parts.push(`printf '\\n${MARKER_PREFIX} run=%s attempt=%s exit=%s\\n' '${input.runId}' '${input.n}' "$berth_rc"`);
  parts.push('berth_self stop');
  return `${parts.join('\n')}\n`;
}

/** The exit code the log's end marker for (runId, n) gives, or null when the log holds none. */
export function taskExitOf(log: string, runId: string, n: number): number | null {
  const lines = log.split(/\r?\n/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = MARKER.exec(lines[i]!);
    if (m && m[1] === runId && Number(m[2]) === n) return Number(m[3]);
  }
  return null;
}

// The largest values a real create puts in the wrapper, for the size check at validation: a run id
// (12 characters), an attempt number, a long service URL and a readiness callback line.
const WORST = {
  runId: 'a'.repeat(12),
  n: 999_999,
  serviceUrl: `https://${'s'.repeat(200)}`,
  callbackLine: `{ ${'c'.repeat(600)} } >/dev/null 2>&1 || true`,
  backstopS: 31_536_000,
};

/** Whether the wrapper for `run` after `onstart` fits the service's onstart limit (compressed if need be). */
export function taskFits(run: string, onstart?: string): boolean {
  return onstartFits(taskScript({ ...WORST, onstart, run }));
}

export const TASK_TOO_LARGE =
  `too large: with onstart and berth's task wrapper it exceeds the service's ${ONSTART_MAX_CHARS}-character onstart limit ` +
  'even compressed; put the command in the image or a script onstart downloads';
