// Imported first by the bench's entry points, for its side effect: the process (and the daemons,
// simulators and browsers it starts, which inherit the environment) gets a temp dir of its own,
// removed when it exits. What a bench makes in a temp dir is then never mixed with the machine's
// /tmp, and a cleanup of what appeared there can never take another process's files
// (bench/browser.ts removes what Chromium unpacked). It must come before any import that reads
// os.tmpdir() when it loads (@sparticuz/chromium does).
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'berth-bench-'));
// Searchable, not listable, by other users: the simulator runs onstart scripts as an unprivileged
// user, and a task bench's scripts wait for a file the bench makes in here (measure-tasks.ts).
chmodSync(dir, 0o711);
process.env['TMPDIR'] = dir;
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
