// Small pieces every page uses: a state told in words, a copy button, a confirmation, a ticking
// clock for relative times, and an error line.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import type { RunState } from '../../wire/run-states.js';
import { ApiError } from '../api.js';
import { stateTone } from '../format.js';
import { useLink } from '../link.js';

export function StateBadge({ state }: { state: RunState }) {
  return <span class={`badge tone-${stateTone(state)}`}>{state}</span>;
}

/** The time now, moved on every `everyMs`: relative times ("5 min ago") stay true without a reload. */
export function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState<'' | 'copied' | 'failed'>('');
  const copy = () =>
    navigator.clipboard.writeText(text).then(
      () => setDone('copied'),
      () => setDone('failed'),
    );
  return (
    <button type="button" class="small" onClick={() => void copy()} aria-label={`Copy ${label}`}>
      {done === 'copied' ? 'Copied' : done === 'failed' ? 'Copy failed: select the text' : 'Copy'}
    </button>
  );
}

/** A button that asks first, in a modal dialog (Escape or "Keep it" closes it). */
export function ConfirmButton(props: {
  label: string;
  question: string;
  confirm: string;
  onConfirm: () => Promise<void>;
  danger?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const { up } = useLink();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const go = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await props.onConfirm();
      dialog.current?.close();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class={props.danger ? 'danger' : ''} disabled={!up} onClick={() => dialog.current?.showModal()}>
        {props.label}
      </button>
      <dialog ref={dialog} aria-label={props.label}>
        <p>{props.question}</p>
        <ErrorNote error={error} />
        <div class="row">
          <button type="button" class={props.danger ? 'danger' : ''} disabled={busy || !up} onClick={() => void go()}>
            {busy ? 'Working…' : props.confirm}
          </button>
          {/* The safe choice has the focus when the dialog opens: Enter does not destroy anything. */}
          <button type="button" autofocus onClick={() => dialog.current?.close()}>
            Keep it
          </button>
        </div>
      </dialog>
    </>
  );
}

export function ErrorNote({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  const message = error instanceof ApiError ? `${error.message} (${error.kind})` : String((error as Error).message ?? error);
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}

export function Section({ title, children, id }: { title: string; children: ComponentChildren; id?: string }) {
  return (
    <section class="card" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}

/** Text from the daemon or the docs with `code` in backticks: the backticks become code, never shown as such. */
export function Coded({ text }: { text: string }) {
  const parts = text.split(/`([^`]+)`/);
  return <>{parts.map((p, i) => (i % 2 === 1 ? <code>{p}</code> : p))}</>;
}

/**
 * A log in a scrolling box that follows its end, as a terminal does: the last lines (where an error
 * is) show first, not the image pull at the top. Once the reader scrolls up it stays where they put it.
 */
export function LogBox({ text, label }: { text: string; label: string }) {
  const box = useRef<HTMLPreElement>(null);
  const follow = useRef(true);
  useLayoutEffect(() => {
    const el = box.current;
    if (el && follow.current) el.scrollTop = el.scrollHeight;
  }, [text]);
  const onScroll = () => {
    const el = box.current;
    if (el) follow.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
  };
  return (
    <pre class="log" ref={box} onScroll={onScroll} tabIndex={0} aria-label={label}>
      {text}
    </pre>
  );
}
