// A task stopped before its outputs are taken, at a cancel or a limit (issue #48): over a login to
// its instance (./task-shells.ts, the follower's and the outputs'), TERM to the task and every
// process below it, then KILL to what is left after a grace, as `docker stop` does to a container
// (TERM, then KILL after 10 s). The task may catch TERM and write its checkpoint meanwhile.
//
// The task is found by the pid its wrapper wrote to `.pid` beside its out-file (the process that
// then execs `sh -c '<run>'`, src/job-spec/task-script.ts), and what runs below it by the parent
// pids in /proc (Linux: a container always has it; no `ps` or `pkill` needed, which slim images
// lack). The tree is read before the TERM: a child whose parent died is reparented and could not
// be found afterwards. A zombie counts as gone. Where berth cannot log in, nothing is stopped here:
// the download cannot log in either (its manifest says why), and a cloud copy stops the instance
// itself, which stops the task the way `docker stop` does.
import { taskFilesVar } from '../../job-spec/task-script.js';
import type { FileShells } from './task-shells.js';

/** How long a task has after TERM to end before KILL, s (docker stop's default). */
export const TASK_STOP_GRACE_S = 10;

/** The exit code of the stop command when the task left no pid (an image whose temp directory could not be written). */
const NO_PID = 3;

/**
 * The sh that stops attempt n's task: exit 0 once it is gone (or had ended: its done-file is there),
 * NO_PID when its pid is unknown. Only POSIX sh, `kill`, `sleep` and /proc.
 */
export function taskStopCommand(runId: string, n: number, graceS = TASK_STOP_GRACE_S): string {
  return [
    `${taskFilesVar(runId, n)}; p=`,
    '{ read -r p <"$berth_f.pid"; } 2>/dev/null',
    `case "$p" in ''|*[!0-9]*) exit ${NO_PID};; esac`,
    '[ -f "$berth_f.done" ] && exit 0',
    // pid:ppid of every process, from /proc/<pid>/stat (the fields after the command's closing paren).
    'berth_tree() { root=$1; t=; for s in /proc/[0-9]*/stat; do { read -r l <"$s"; } 2>/dev/null || continue; r=${l##*) }; set -f; set -- $r; set +f; q=${s#/proc/}; t="$t ${q%/stat}:$2"; done; ' +
      'all=" $root "; fr="$root"; while [ -n "$fr" ]; do nf=; for e in $t; do c=${e%%:*}; pp=${e#*:}; ' +
      'case " $fr " in *" $pp "*) case "$all" in *" $c "*) ;; *) all="$all$c "; nf="$nf $c";; esac;; esac; done; fr=$nf; done; echo $all; }',
    // Alive: listed, and not a zombie (an orphan nobody reaps stays one).
    'berth_live() { for x in $ps; do { read -r l </proc/$x/stat; } 2>/dev/null || continue; r=${l##*) }; case "$r" in Z*|X*) ;; *) return 0;; esac; done; return 1; }',
    'ps=$(berth_tree "$p")',
    'kill -s TERM $ps 2>/dev/null',
    'st=5; sleep 0.2 2>/dev/null || st=1',
    'i=0',
    `while berth_live && [ $i -lt $((${Math.ceil(graceS)}*st)) ]; do sleep 0.2 2>/dev/null || sleep 1; i=$((i+1)); done`,
    'berth_live && kill -s KILL $ps $(berth_tree "$p") 2>/dev/null',
    // A KILL is delivered, not done: gone within a second, so the outputs are read after the last write.
    'i=0; while berth_live && [ $i -lt $st ]; do sleep 0.2 2>/dev/null || sleep 1; i=$((i+1)); done',
    'exit 0',
  ].join('\n');
}

export type TaskStopResult = 'stopped' | 'no_pid' | { failed: string };

/**
 * Stops attempt n's task over a login (bounded by `signal`: the collection's deadline). Never
 * throws: a login or command that fails is the answer, and the outputs are taken anyway.
 */
export async function stopTask(
  shells: FileShells,
  t: { runId: string; n: number; instanceId: number },
  signal: AbortSignal,
): Promise<TaskStopResult> {
  let shell;
  try {
    shell = await shells.open(t, signal);
    const { code } = await shell.exec(taskStopCommand(t.runId, t.n), { signal, onStdout: () => {} });
    if (code === NO_PID) return 'no_pid';
    return code === 0 ? 'stopped' : { failed: `the stop command exited with code ${code}` };
  } catch (err) {
    return { failed: (err as Error).message };
  } finally {
    shell?.close();
  }
}
