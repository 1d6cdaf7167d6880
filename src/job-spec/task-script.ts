// The wrapper berth sends as a task's onstart (issue #19, hardened in #29):
//
//   1. traps: the wrapper outlives a `kill 0` or a stray TERM/INT/HUP from the user's scripts (a
//      caught signal is reset to its default in every child, so the task's own handling is unchanged);
//   2. a backstop (when the run has a limit): a background `sleep` that destroys the instance with
//      its own key (CONTAINER_API_KEY) once the run's limit, as it stood at the create, has passed by
//      a grace period, whatever became of the daemon. It sleeps until an absolute time when `date`
//      is there, so a container started again (after an outbid) does not get the whole limit anew;
//   3. the user's onstart in a shell of its own (`"${BASH:-sh}" -c '<onstart>'`: the interpreter the
//      service runs onstart with): its `set -e`, `exit`, `exec`, traps, `cd` and syntax errors stay
//      in that shell. An onstart that ends non-zero ends the attempt before the task starts, with a
//      marker saying so (`stage=onstart`);
//   4. the readiness callback line (when configured), then the `run` command as `sh -c '<run>'`
//      (its environment given LIVE_OUTPUT_ENV where unset, so a Python task's output is live),
//      stdin closed, stderr joined to stdout, so its output is the container's log; where the
//      image has `tee` and `mkfifo`, also appended to an out-file the daemon follows over SSH
//      (`runCall` below), its exit code still exact;
//   5. the end marker, a line of its own in that log: `berth-task-end run=<run id> attempt=<n>
//      exit=<code>`. Only the task's end writes it: an outbid, a host that failed or a user's stop
//      leaves none, so the daemon never decides a task's end on a status alone;
//   6. a stop of its own instance with its own key (manage_instance `{"state": "stopped"}`), with
//      curl or wget (with keep_on_failure_s, a failed task's instance is left running instead and
//      destroyed by a background `sleep` once the keep has passed: `stopOrKeep` below). This is only the fast path: an image with neither, or a container that cannot
//      reach the service, still ends the task, because the daemon also reads the log of every
//      running task on a schedule of its own (src/daemon/task-end/task-probe.ts).
//
// A task runs once per attempt, however often its container starts. The service runs onstart again
// on every container start ("Place startup commands in /root/onstart.sh. This script runs
// automatically on container startup", vast-ai/docs guides/reference/faq/instances.mdx): a reboot
// ("docker stop/start", reboot_instance.yaml), a start after a stop, an interruptible instance whose
// bid wins again. The container's files survive those ("When an instance is "stopped" all of your
// data on the instance is preserved", cli/reference/stop-instance.mdx). So before it prints the
// marker the wrapper writes it to a done-file in the container's temp directory; a start that finds
// the file prints that marker again and stops its instance again instead of running onstart and the
// task again (issue #37). It reads the file with the shell's `read`: no tool the image may lack.
//
// The daemon needs no way in: the container calls out to the service only, as the service's docs
// allow ("You can also stop or destroy the instance from within", docker-environment.mdx).
import { ONSTART_MAX_CHARS, onstartFits } from './onstart.js';

export interface TaskScriptInput {
  /** The user's onstart script, run first in a shell of its own. */
  onstart?: string | undefined;
  /** The readiness callback line, run once onstart has run. */
  callbackLine?: string | undefined;
  run: string;
  runId: string;
  n: number;
  /** The service's base URL, as berth's client uses it (`service.base_url`). */
  serviceUrl: string;
  /** When the container destroys itself, and when the wrapper was made (s since epoch); null: no backstop. */
  backstop: { atS: number; madeAtS: number } | null;
  /**
   * The latest moment (s since epoch, by the host's clock) the container's first start may begin the
   * task: no later than the attempt's boot deadline. A first start after it destroys its instance and
   * runs nothing, since berth has given the attempt up by then and rents the task elsewhere (issue
   * #49: a container that began its task in the milliseconds between the deadline's last look and
   * its destroy ran the task twice). A start again (a reboot, an outbid's end) is not held to it.
   */
  startByS?: number | undefined;
  /**
   * The task leaves outputs (issue #40): at its end the self-stop waits, at most this many seconds
   * (files.outputs_timeout_s), for the daemon's `.got` (outputs taken): a stopped instance has no
   * sshd to download from. Absent: no wait.
   */
  outputsWaitS?: number | undefined;
  /**
   * keep_on_failure_s (issue #50): a task that fails (or whose onstart does) does not stop its
   * instance at its end (a stopped instance has no sshd): it keeps it running for `berth ssh` and
   * destroys it itself this many seconds later, whatever became of the daemon. Absent or 0: the stop.
   */
  keepOnFailureS?: number | undefined;
  /**
   * warm.idle_s (issue #51): a task that ended on its own (exit 0 or a task failure, not its onstart,
   * workdir or a late start), its outputs taken (`.got`) when it has any, does not stop its instance:
   * it stays running for the daemon to hand to the next run of its reuse key, and destroys itself this
   * many seconds later unless a recycle replaced this container first, whatever became of the daemon.
   * Outputs not taken: the stop, as without it (a stopped instance keeps its disk for them).
   */
  warmIdleS?: number | undefined;
  /** The container directory the task starts in (made if missing); default /root/workdir. */
  dir?: string | undefined;
  /** The workdir the daemon uploads into `dir`: the task waits for its ready-file, at most `waitS` seconds. */
  workdir?: { sha256: string; waitS: number } | null | undefined;
}

/** The task's directory when the plan gives none (the job spec's WORKDIR_DEST_DEFAULT). */
const DIR_DEFAULT = '/root/workdir';

/**
 * The file the daemon writes last into the task's directory, holding the workdir's sha256 and a
 * newline, by a rename (src/daemon/task-files/workdir-upload.ts): once the wrapper reads the right
 * hash there, every file of the workdir is in place.
 */
export const WORKDIR_READY_FILE = '.berth-ready';

/** The most warm.idle_s a spec may ask for, s (an hour): the warm instance bills its GPU. */
export const WARM_IDLE_MAX_S = 3600;
/** The most keep_on_failure_s a spec may ask for, s (an hour): the kept instance bills its GPU. */
export const KEEP_ON_FAILURE_MAX_S = 3600;

/** How long the wrapper waits for a following daemon's ack before its self-stop, s. */
const FOLLOW_ACK_WAIT_S = 10;

/** The marker's prefix; a line of the container's log matching MARKER is the task's end. */
export const MARKER_PREFIX = 'berth-task-end';
const MARKER = /^berth-task-end run=([a-z2-7]+) attempt=(\d+) exit=(\d{1,3})(?: stage=(onstart|workdir|late))?\s*$/;

/** How a task's attempt ended, as its end marker says. */
export interface TaskEnd {
  exitCode: number;
  /** The user's onstart ended non-zero, so the task never started. */
  onstart: boolean;
  /** The workdir did not arrive in time (`stage=workdir`), so the task never started: the attempt fails over. */
  workdir?: boolean;
}

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
    '  elif command -v wget >/dev/null 2>&1; then',
    `    wget -q -O /dev/null -T 20 -t 5 --method="$berth_m" --header="Authorization: Bearer $CONTAINER_API_KEY" --header='Content-Type: application/json' --body-data="$berth_d" "$berth_u"`,
    '  fi >/dev/null 2>&1',
    '}',
  ].join('\n');
}

/**
 * `berth_f=...`: where attempt n keeps its files in its container's temp directory, without their
 * suffix: `.out` (the task's output), `.done` (its end marker, written before the marker is logged),
 * `.pid` (the task's process, while it runs). The daemon's reads over SSH name them the same way
 * (src/daemon/task-end/task-follow.ts). A TMPDIR that is not a directory berth can write (one that
 * does not exist, say) is /tmp instead (issue #49): a done-file that cannot be written leaves the
 * follow nothing to see (it then finds the task's process gone, after a while).
 */
export function taskFilesVar(runId: string, n: number): string {
  return (
    'berth_d=${TMPDIR:-/tmp}; { [ -d "$berth_d" ] && [ -w "$berth_d" ]; } || berth_d=/tmp; ' + `berth_f="$berth_d/berth-task-${runId}-${n}"`
  );
}

/**
 * `berth_run`: the task, its pid in the out-file's `.pid`. Its output also goes, appended, to the out-file `berth-task-<run>-<n>.out`
 * in the container's temp directory, which the daemon reads over SSH (src/daemon/task-end/task-follow.ts):
 * through a FIFO to a `tee` in the background, never a pipe, so the exit code is sh's own (POSIX sh
 * has no pipefail) and a process the task leaves running with its output open cannot hold the end
 * (a pipeline waits for its `tee`; this waits for it 5 s at most, then kills it: the task is over,
 * its instance is about to go). The `tee` ignores HUP, INT and TERM, so a `kill 0` from the task
 * does not cut its output short. An image without `tee` or `mkfifo` (or a temp directory that cannot
 * be written) runs the task as before, its output in the log alone.
 */
function runCall(run: string): string {
  const fifo = '"$berth_f.fifo"';
  return [
    // The task's pid goes to `.pid` first (the same process then execs the task): the daemon's follow
    // sees there whether the task still runs (src/daemon/task-end/task-follow.ts), and a cancel or a
    // limit stops the task by it, TERM then KILL, to take its outputs (src/daemon/task-end/task-stop.ts).
    `berth_run() { sh -c '{ echo "$$" >"$1"; } 2>/dev/null; exec sh -c "$2"' berth "$berth_f.pid" ${shellQuote(run)} </dev/null 2>&1; }`,
    `if command -v tee >/dev/null 2>&1 && rm -f ${fifo} 2>/dev/null && mkfifo ${fifo} 2>/dev/null; then`,
    // The FIFO is opened inside, after the trap: opened outside, the reader is up before it ignores
    // TERM, and a task's `kill 0` in that instant killed it (the task then died of SIGPIPE, not TERM).
    `  ( trap '' HUP INT TERM; exec tee -a "$berth_f.out" <${fifo} ) &`,
    '  berth_tee=$!',
    `  berth_run >${fifo}`,
    '  berth_rc=$?',
    `  ( sleep 5; kill -s KILL "$berth_tee" ) >/dev/null 2>&1 &`,
    '  berth_dog=$!',
    '  wait "$berth_tee"',
    `  kill "$berth_dog" 2>/dev/null; rm -f ${fifo}`,
    'else',
    '  berth_run',
    '  berth_rc=$?',
    'fi',
  ].join('\n');
}

/**
 * `berth_end MARKER`: the attempt ended. The marker goes to the done-file first (a container stopped
 * between the two still finds it at its next start), then to the log on a line of its own, then the
 * instance stops itself. A done-file that cannot be written (a read-only temp directory) is skipped.
 * When the daemon follows the task over SSH (its `.att` file is there), the stop waits until the
 * daemon has read the end and the last output (its ack), at most FOLLOW_ACK_WAIT_S: a stop first
 * would cut the login, and the end would then be read through the logs endpoint instead.
 *
 * The wait is a `read` on a FIFO, `.ack`, the wrapper holds open (read-write: no open blocks) from
 * before the done-file is written, so the daemon's ack (a line written to it) wakes it at once and
 * the wait starts one process, the `sleep` that bounds it (which writes a line of its own). A nap
 * loop of `sleep 0.2` until a `.ack` file appears was five processes a second per ended task: a
 * hundred tasks ending together on the simulator's one host made 500 a second, and measured in
 * `npm run bench -- --only tasks-ssh` that load alone put the last destroy 15 s after the go instead
 * of 6-7 s. Where there is no `mkfifo` (or the FIFO cannot be made) the loop remains; the daemon's
 * ack (`echo ack 1<>` the `.ack`) makes the file then. `command exec`: a redirection a plain `exec`
 * fails ends a POSIX shell, and with it the stop.
 */
function endCall(runId: string, n: number, outputsWaitS?: number, keepS?: number, warmS?: number): string {
  // With outputs, the daemon's `.got` is waited for whether or not it follows now: a daemon down at
  // the task's end and back within the wait still takes them. Bounded; the daemon's destroy (or its
  // `.got`) ends it sooner.
  const outputs =
    outputsWaitS === undefined
      ? ''
      : `berth_i=0; while [ ! -f "$berth_f.got" ] && [ $berth_i -lt ${Math.ceil(outputsWaitS)} ]; do sleep 1; berth_i=$((berth_i+1)); done; `;
  const ack = '"$berth_f.ack"';
  return [
    `${taskFilesVar(runId, n)}; berth_done="$berth_f.done"`,
    `berth_end() { berth_p=; if [ -f "$berth_f.att" ] && { [ -p ${ack} ] || mkfifo ${ack}; } && command exec 4<>${ack}; then berth_p=1; fi 2>/dev/null; ` +
      `{ echo "$1" >"$berth_done"; } 2>/dev/null; printf '\\n%s\\n' "$1"; ` +
      `if [ -n "$berth_p" ]; then ( sleep ${FOLLOW_ACK_WAIT_S}; echo t >&4 ) >/dev/null 2>&1 & berth_t=$!; IFS= read -r berth_a <&4; kill "$berth_t" 2>/dev/null; command exec 4<&-; ` +
      // Acked: a regular `.ack` says so to a start of this container again (its wrapper then waits for none).
      `[ "$berth_a" = ack ] && rm -f ${ack} && : >${ack}; ` +
      // The daemon acked (the FIFO's line or the loop's file): it is there to hand the instance on.
      `[ -f ${ack} ] && berth_seen=1; ` +
      `else berth_i=0; while [ -f "$berth_f.att" ] && [ ! -f ${ack} ] && [ $berth_i -lt ${FOLLOW_ACK_WAIT_S * 5} ]; do ` +
      `sleep 0.2 2>/dev/null || sleep 1; berth_i=$((berth_i+1)); done; [ -f ${ack} ] && berth_seen=1; fi; ${outputs}${stopOrKeep(keepS, warmS, outputsWaitS !== undefined)}; }`,
  ].join('\n');
}

/**
 * The end's last step: the self-stop, or (keep_on_failure_s) for a failed task or onstart, a
 * background destroy once the keep has passed, the instance left running for SSH meanwhile. Only
 * an end this container just had keeps (`berth_rc` set; a start again that finds the done-file
 * stops), and not a workdir that never came (the task never ran: the daemon fails over). It comes
 * after the ack and outputs waits, as the daemon's keep begins after the outputs are taken.
 */
function stopOrKeep(keepS?: number, warmS?: number, hasOutputs = false): string {
  const otherwise = warmS !== undefined && warmS > 0 ? warmOrStop(warmS, hasOutputs) : 'berth_self stop';
  if (keepS === undefined || keepS <= 0) return otherwise;
  return (
    `if [ "\${berth_rc:-0}" -ne 0 ]; then case "$1" in *stage=workdir*) berth_self stop ;; *) ` +
    `( sleep ${Math.ceil(keepS)}; echo 'berth: keep_on_failure_s passed; destroying this instance'; berth_self destroy ) & ;; esac; ` +
    `else ${otherwise}; fi`
  );
}

/**
 * warm.idle_s: an end this container just had (`berth_rc` set), of the task itself (no `stage=`),
 * with the daemon there to hand the instance on (it took the outputs, `.got`, when the task has
 * any; else it acked the end it read over SSH, `berth_seen`, waited for up to idle_s: a task that
 * ended before the daemon logged in is acked once it has), keeps the instance running and destroys
 * it once idle_s has passed. Anything else stops, as without warm: a daemon away at the task's end
 * reads the end from the stopped instance when it comes back, whenever that is, where a warm one
 * would have destroyed itself with the end's log.
 */
function warmOrStop(warmS: number, hasOutputs: boolean): string {
  const idle = Math.ceil(warmS);
  const taken = hasOutputs
    ? ' && [ -f "$berth_f.got" ]'
    : ` && { berth_i=0; while [ -z "\${berth_seen:-}" ] && [ $berth_i -lt ${idle} ]; do [ -f "$berth_f.ack" ] && berth_seen=1 && break; sleep 1; berth_i=$((berth_i+1)); done; [ -f "$berth_f.ack" ] && berth_seen=1; [ -n "\${berth_seen:-}" ]; }`;
  // The stage first: an onstart, workdir or late start never waits for the daemon.
  return (
    `case "$1" in *stage=*) berth_self stop ;; *) if [ -n "\${berth_rc:-}" ]${taken}; then ` +
    `( sleep ${idle}; echo 'berth: warm idle_s passed; destroying this instance'; berth_self destroy ) & ` +
    'else berth_self stop; fi ;; esac'
  );
}

function marker(runId: string, n: number, stage: string): string {
  return `berth_end "${MARKER_PREFIX} run=${runId} attempt=${n} exit=$berth_rc${stage}"`;
}

/**
 * A container directory as an sh word. A path under /root is read from root's home, `$HOME` (where
 * a login's relative paths start too, OpenSSH's sftp-server included), so the wrapper, the daemon's
 * commands and its SFTP name one directory; in a container run as root, $HOME is /root.
 */
export function containerDirWord(dir: string): string {
  const path = dir.replace(/\/+$/, '');
  if (path === '/root') return '"${HOME:-/root}"';
  if (path.startsWith('/root/')) return `"\${HOME:-/root}"${shellQuote(path.slice('/root'.length))}`;
  return shellQuote(path);
}

/**
 * The task's directory, made (empty) when missing; with a workdir, the wait for its ready-file
 * holding the right sha256, at most `waitS` one-second naps of the shell's own loop and `read`
 * (no tool the image may lack but `sleep`). Not there in time: the marker with `stage=workdir`
 * (the attempt fails over, the task never starts without its code). Then the `cd` the task starts from.
 */
function dirCall(input: TaskScriptInput): string {
  const lines = [`berth_wd=${containerDirWord(input.dir ?? DIR_DEFAULT)}`, 'mkdir -p "$berth_wd" 2>/dev/null || :'];
  const wd = input.workdir;
  if (wd) {
    const failed = (why: string) =>
      `berth_rc=1; echo "berth: ${why}; the task does not start"; ${marker(input.runId, input.n, ' stage=workdir')}; exit 1`;
    lines.push(
      'berth_i=0',
      `until [ -f "$berth_wd/${WORKDIR_READY_FILE}" ] && read -r berth_l <"$berth_wd/${WORKDIR_READY_FILE}" && [ "$berth_l" = ${wd.sha256} ]; do`,
      `  if [ "$berth_i" -ge ${Math.ceil(wd.waitS)} ]; then ${failed(`the workdir did not arrive within ${Math.ceil(wd.waitS)} s`)}; fi`,
      '  sleep 1; berth_i=$((berth_i+1))',
      'done',
      `cd "$berth_wd" || { ${failed('the workdir cannot be entered')}; }`,
    );
  } else lines.push('cd "$berth_wd" 2>/dev/null || :');
  return lines.join('\n');
}

/**
 * What the task's environment gets unless it already holds the name (the spec's `env` or
 * `secrets`, or the image's own ENV: `${NAME=value}` assigns only an unset name, so even an empty
 * value set on purpose stays): a Python task's `print()` under a pipe is block-buffered, so a
 * follow showed nothing for half a minute and then every line at once (issue #50). SkyPilot sets
 * the same for every task (sky/skylet/log_lib.py, make_task_bash_script: "export PYTHONUNBUFFERED=1",
 * "used to disable python output buffering"). Only Python has such a switch: C's stdio (and what is
 * built on it) has no environment variable for it (`stdbuf` works by LD_PRELOAD of a library the
 * image may lack), and Node writes each line to a pipe as it comes. docs/tasks.md, "Output buffering".
 */
const LIVE_OUTPUT_ENV: Readonly<Record<string, string>> = { PYTHONUNBUFFERED: '1' };

function liveEnvCall(): string {
  return Object.entries(LIVE_OUTPUT_ENV)
    .map(([name, value]) => `: "\${${name}=${value}}"; export ${name}`)
    .join('\n');
}

/** The whole script, before any compression (src/daemon/runs/create-actor.ts encodes it with encodeOnstart). */
export function taskScript(input: TaskScriptInput): string {
  const parts: string[] = [`# berth task: run ${input.runId}, attempt ${input.n}`, "trap 'berth_sig=1' HUP INT TERM"];
  parts.push(selfCall(input.serviceUrl));
  if (input.backstop !== null) {
    const { atS, madeAtS } = input.backstop;
    parts.push(
      `( berth_w=$(( ${Math.ceil(atS)} - $(date +%s 2>/dev/null || echo ${Math.floor(madeAtS)}) )); ` +
        `[ "$berth_w" -gt 0 ] && sleep "$berth_w"; echo 'berth: the run limit passed; destroying this instance'; berth_self destroy ) &`,
    );
  }
  parts.push(endCall(input.runId, input.n, input.outputsWaitS, input.keepOnFailureS, input.warmIdleS));
  // A container started again after its attempt ended: the same end, said again, and no second run.
  parts.push('if [ -f "$berth_done" ] && read -r berth_line <"$berth_done"; then berth_end "$berth_line"; exit 0; fi');
  // The first start, too late: berth gave the attempt up at its boot deadline. (No `date`: no check.)
  if (input.startByS !== undefined) {
    const late = `berth: this container started after its boot deadline; berth gave it up, the task does not start here`;
    parts.push(
      `if [ ! -f "$berth_f.began" ]; then { : >"$berth_f.began"; } 2>/dev/null; ` +
        // Whole seconds: the second that holds the moment counts as after it (never a start too late).
        `if [ "$(date +%s 2>/dev/null || echo 0)" -ge ${Math.floor(input.startByS)} ]; then echo '${late}'; ` +
        // With curl or wget it destroys its instance; without, its marker (`stage=late`: the task
        // never started, read as the workdir's is) tells berth to fail the attempt over, never to
        // leave it running with nothing to end it.
        `if { command -v curl || command -v wget; } >/dev/null 2>&1; then berth_self destroy; exit 0; fi; ` +
        `berth_rc=1; ${marker(input.runId, input.n, ' stage=late')}; exit 1; fi; fi`,
    );
  }
  // The pid of an earlier start's task names no process of this one: emptied until the task starts.
  parts.push('{ : >"$berth_f.pid"; } 2>/dev/null');
  if (input.onstart) {
    parts.push(`"\${BASH:-sh}" -c ${shellQuote(input.onstart)}`);
    parts.push('berth_rc=$?');
    parts.push('if [ "$berth_rc" -ne 0 ]; then');
    parts.push(`  ${marker(input.runId, input.n, ' stage=onstart')}`);
    parts.push('  exit "$berth_rc"');
    parts.push('fi');
  }
  if (input.callbackLine) parts.push(input.callbackLine);
  parts.push(dirCall(input));
  parts.push(liveEnvCall());
  parts.push(runCall(input.run));
  parts.push(marker(input.runId, input.n, ''));
  return `${parts.join('\n')}\n`;
}

/** How attempt n's task ended by the log's end marker for (runId, n), or null when the log holds none. */
export function taskEndOf(log: string, runId: string, n: number): TaskEnd | null {
  const lines = log.split(/\r?\n/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = MARKER.exec(lines[i]!);
    if (m && m[1] === runId && Number(m[2]) === n)
      // `late` (a first start after the boot deadline, issue #49) never started the task either: the
      // attempt fails over as for a workdir that never came.
      return { exitCode: Number(m[3]), onstart: m[4] === 'onstart', ...(m[4] === 'workdir' || m[4] === 'late' ? { workdir: true } : {}) };
  }
  return null;
}

/** The exit code the log's end marker for (runId, n) gives, or null when the log holds none. */
export function taskExitOf(log: string, runId: string, n: number): number | null {
  return taskEndOf(log, runId, n)?.exitCode ?? null;
}

// The largest values a real create puts in the wrapper, for the size check at validation: a run id
// (12 characters), an attempt number, a long service URL and a readiness callback line.
const WORST = {
  runId: 'a'.repeat(12),
  n: 999_999,
  serviceUrl: `https://${'s'.repeat(200)}`,
  callbackLine: `{ ${'c'.repeat(600)} } >/dev/null 2>&1 || true`,
  backstop: { atS: 99_999_999_999, madeAtS: 99_999_999_999 },
  startByS: 99_999_999_999,
  outputsWaitS: 86_400,
  keepOnFailureS: KEEP_ON_FAILURE_MAX_S,
  warmIdleS: WARM_IDLE_MAX_S,
  dir: `/${'d'.repeat(255)}`,
  workdir: { sha256: 'f'.repeat(64), waitS: 86_400 },
};

/** Whether the wrapper for `run` after `onstart` fits the service's onstart limit (compressed if need be). */
export function taskFits(run: string, onstart?: string): boolean {
  return onstartFits(taskScript({ ...WORST, onstart, run }));
}

export const TASK_TOO_LARGE =
  `too large: with onstart and berth's task wrapper it exceeds the service's ${ONSTART_MAX_CHARS}-character onstart limit ` +
  'even compressed; put the command in the image or a script onstart downloads';
