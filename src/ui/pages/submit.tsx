// Submit: paste or upload a job spec; it is checked against the JSON Schema as it is typed (every
// issue at its path), then sent with an Idempotency-Key made once per text, so a double click or a
// retry after a lost answer makes one run, not two.
import { useMemo, useRef, useState } from 'preact/hooks';
import type { Run } from '../../wire/control-api.js';
import { ApiError, call } from '../api.js';
import { ErrorNote } from '../parts/common.js';
import { useLink } from '../link.js';
import { checkSpecText } from '../spec-check.js';

/** Where a first spec starts from: the smallest useful one (examples/first-job.json). */
const EXAMPLE = `{
  "name": "first-job",
  "image": "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
  "max_price_per_hour": 0.5,
  "search": {
    "filters": {
      "gpu_name": { "in": ["RTX 4090", "RTX 3090"] },
      "num_gpus": { "eq": 1 }
    }
  }
}
`;

export function SubmitPage() {
  const { up } = useLink();
  const [text, setText] = useState('');
  const [serverIssues, setServerIssues] = useState<Array<{ path: string; message: string }>>([]);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const key = useRef<{ text: string; key: string } | undefined>(undefined);
  const checked = useMemo(() => checkSpecText(text), [text]);

  const onFile = async (file: File | undefined) => {
    if (file) setText(await file.text());
  };
  const submit = async () => {
    if (checked.issues.length > 0) return;
    if (key.current?.text !== text) key.current = { text, key: crypto.randomUUID() };
    setBusy(true);
    setError(undefined);
    setServerIssues([]);
    try {
      const run = await call<Run>('POST', '/v1/runs', checked.spec, { 'idempotency-key': key.current.key });
      location.hash = `#/runs/${encodeURIComponent(run.id)}`;
    } catch (err) {
      if (err instanceof ApiError && err.issues.length > 0) setServerIssues(err.issues);
      else setError(err);
    } finally {
      setBusy(false);
    }
  };
  const issues = [...checked.issues, ...serverIssues];
  return (
    <>
      <h1>Submit a run</h1>
      <p class="muted">
        A job spec as <code>berth submit</code> takes it (<code>berth schema</code> prints its JSON Schema). It is checked as you type; the
        daemon checks it again when it is sent.
      </p>
      <label class="block">
        Upload a file{' '}
        <input type="file" accept="application/json,.json" onChange={(e) => void onFile((e.target as HTMLInputElement).files?.[0])} />
      </label>
      <label class="block" for="spec">
        Job spec (JSON)
      </label>
      <textarea
        id="spec"
        rows={18}
        spellcheck={false}
        value={text}
        aria-describedby="spec-issues"
        aria-invalid={text.trim() !== '' && issues.length > 0}
        onInput={(e) => {
          setText((e.target as HTMLTextAreaElement).value);
          setServerIssues([]);
        }}
      />
      <p>
        <button type="button" class="small" onClick={() => setText(EXAMPLE)}>
          Start from an example
        </button>{' '}
        <span class="muted">one GPU, an RTX 4090 or 3090, at $0.50/h at most: change what you need.</span>
      </p>
      <div id="spec-issues" aria-live="polite">
        {text.trim() === '' ? (
          <p class="muted">Paste a job spec, upload a file, or start from the example.</p>
        ) : issues.length === 0 ? (
          <p class="ok">The spec is valid.</p>
        ) : (
          <ul class="issues" aria-label="Problems in the spec">
            {issues.map((i) => (
              <li>
                <code>{i.path}</code>: {i.message}
              </li>
            ))}
          </ul>
        )}
      </div>
      <ErrorNote error={error} />
      <button
        type="button"
        class="primary"
        disabled={busy || !up || text.trim() === '' || checked.issues.length > 0}
        onClick={() => void submit()}
      >
        {busy ? 'Submitting…' : 'Submit'}
      </button>
    </>
  );
}
