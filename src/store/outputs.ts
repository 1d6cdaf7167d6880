// The run_outputs table: what a task left, per attempt (issue #40). A row is written before the
// transfer starts (state `collecting`, or `copying` for a cloud copy): a daemon killed during it
// finds the intent, and the restarted run takes the outputs again or destroys (the machine decides).
// Once the transfer ends, the row holds the manifest: every file kept, its size and sha256, and
// whether all came (`kept`), some (`partial`), none (`failed`), or the service's copy finished
// (`copied`). `host` names the daemon's host that keeps the files: `berth outputs` reads them there.
import type { SqlDb } from './sql-db.js';

/** One file kept: its container path (absolute), the name it is kept under, its size in bytes and its sha256 (hex). */
export interface OutputFile {
  path: string;
  /** Relative to the attempt's folder (src/daemon/task-files/outputs-download.ts keptName). */
  name: string;
  size: number;
  sha256: string;
  /** Only its first `size` bytes came (the size cap, or the download was stopped). */
  partial?: true;
}

export type OutputsState = 'collecting' | 'kept' | 'partial' | 'failed' | 'copying' | 'copied';

export interface OutputsRow {
  run_id: string;
  attempt: number;
  state: OutputsState;
  host: string;
  dir: string | null;
  files: OutputFile[];
  bytes: number;
  detail: string | null;
  started_at: number;
  ended_at: number | null;
}

type StoredRow = Omit<OutputsRow, 'files'> & { manifest_json: string };

const fromStored = ({ manifest_json, ...r }: StoredRow): OutputsRow => ({ ...r, files: JSON.parse(manifest_json) as OutputFile[] });

export function createOutputsRepo(db: SqlDb) {
  const begin = db.prepare(
    `INSERT INTO run_outputs (run_id, attempt, state, host, dir, manifest_json, bytes, detail, started_at, ended_at)
     VALUES (@runId, @attempt, @state, @host, @dir, '[]', 0, @detail, @at, NULL)
     ON CONFLICT (run_id, attempt) DO UPDATE SET state = excluded.state, host = excluded.host, dir = excluded.dir,
       manifest_json = '[]', bytes = 0, detail = excluded.detail, started_at = excluded.started_at, ended_at = NULL`,
  );
  const finish = db.prepare(
    `UPDATE run_outputs SET state = @state, manifest_json = @manifest, bytes = @bytes, detail = @detail, ended_at = @at
     WHERE run_id = @runId AND attempt = @attempt`,
  );
  const forRun = db.prepare(`SELECT * FROM run_outputs WHERE run_id = ? ORDER BY attempt`);
  const one = db.prepare(`SELECT * FROM run_outputs WHERE run_id = ? AND attempt = ?`);
  const remove = db.prepare(`DELETE FROM run_outputs WHERE run_id = ?`);
  const forRuns = db.prepare(`SELECT * FROM run_outputs WHERE run_id IN ${db.dialect.jsonTextValues('?')} ORDER BY run_id, attempt`);
  return {
    /** The intent, before the transfer: a new try of the same attempt starts its manifest afresh. */
    begin(o: {
      runId: string;
      attempt: number;
      state: 'collecting' | 'copying';
      host: string;
      dir: string | null;
      detail: string | null;
      at: number;
    }): void {
      begin.run(o);
    },
    /** What came, once the transfer ended (or was cut). */
    finish(o: {
      runId: string;
      attempt: number;
      state: Exclude<OutputsState, 'collecting' | 'copying'>;
      files: OutputFile[];
      detail: string | null;
      at: number;
    }): void {
      const bytes = o.files.reduce((n, f) => n + f.size, 0);
      finish.run({
        runId: o.runId,
        attempt: o.attempt,
        state: o.state,
        manifest: JSON.stringify(o.files),
        bytes,
        detail: o.detail,
        at: o.at,
      });
    },
    get(runId: string, attempt: number): OutputsRow | undefined {
      const r = one.get(runId, attempt) as StoredRow | undefined;
      return r && fromStored(r);
    },
    forRun(runId: string): OutputsRow[] {
      return (forRun.all(runId) as StoredRow[]).map(fromStored);
    },
    /** Those of several runs at once (a page of the run list). */
    forRuns(runIds: readonly string[]): OutputsRow[] {
      return runIds.length === 0 ? [] : (forRuns.all(JSON.stringify(runIds)) as StoredRow[]).map(fromStored);
    },
    /** With its run (retention): the files on disk stay where they are. */
    deleteRun(runId: string): void {
      remove.run(runId);
    },
  };
}
