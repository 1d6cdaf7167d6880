// Removes secrets (the API key, env values) from service text before berth quotes any of it. The
// service may echo what it was sent, and not only verbatim: in another letter case, JSON-escaped
// (a JSON string inside a message, or Python's \uXXXX escapes), URL-encoded, or cut short by its own
// truncation. So any run of the text, of at least MIN_FRAGMENT characters, that is a piece of a
// secret in one of those forms, compared without case, is replaced. A secret shorter than
// MIN_FRAGMENT is replaced only whole, and one shorter than MIN_SECRET (a "1", a "true") is not
// sought: it would blank out ordinary words and tells nothing on its own.
//
// Over-redaction is harmless (the text is only ever a message); a missed fragment is not.
//
// A container's log is another matter: it is the task's own output, read by people, and a piece of
// a secret matched anywhere blots out ordinary words ("loaded [redacted] weights"). A program prints
// a secret whole, or cut where its line or the log's tail is cut; so with `pieces: 'at-line-edges'`
// every form is still replaced wherever it is, and a piece only where it starts or ends a line.

/** Shortest secret worth seeking. */
const MIN_SECRET = 4;
/** Shortest piece of a longer secret that is replaced. */
const MIN_FRAGMENT = 6;
/** Service text past this is cut before scrubbing: no message quotes that much. */
export const MAX_SCRUBBED_TEXT = 2000;
const MARK = '[redacted]';

/** Lower case that keeps every index in place (a few characters lower-case to two). */
function fold(text: string): string {
  const lower = text.toLowerCase();
  if (lower.length === text.length) return lower;
  let out = '';
  for (const ch of text) {
    const l = ch.toLowerCase();
    out += l.length === ch.length ? l : ch;
  }
  return out;
}

/** The forms a secret may come back in, folded. */
function formsOf(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  const asciiJson = json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const forms = new Set([secret, json, asciiJson, encodeURIComponent(secret), JSON.stringify(json).slice(1, -1)]);
  return [...forms].map(fold);
}

/**
 * The secrets to keep out of messages, indexed by every MIN_FRAGMENT-character piece of every form,
 * so scrubbing costs one set look-up per character of the text, however many secrets there are
 * (a daemon remembers the env values of every create it sent). A window that matches pieces of two
 * different secrets is hidden too: over-redaction only.
 */
export class SecretScrubber {
  private readonly known = new Set<string>();
  private readonly pieces = new Set<string>();
  /** Forms replaced whole wherever they are: those shorter than MIN_FRAGMENT, and at line edges every one. */
  private readonly whole = new Set<string>();
  private readonly atLineEdges: boolean;

  constructor(secrets: Iterable<string> = [], options: { pieces?: 'anywhere' | 'at-line-edges' } = {}) {
    this.atLineEdges = options.pieces === 'at-line-edges';
    for (const s of secrets) this.add(s);
  }

  add(secret: string): void {
    if (secret.length < MIN_SECRET || this.known.has(secret)) return;
    this.known.add(secret);
    for (const form of formsOf(secret)) {
      if (form.length < MIN_FRAGMENT || this.atLineEdges) this.whole.add(form);
      if (form.length >= MIN_FRAGMENT)
        for (let i = 0; i + MIN_FRAGMENT <= form.length; i++) this.pieces.add(form.slice(i, i + MIN_FRAGMENT));
    }
  }

  /** `text` with every form and every long enough piece of each secret replaced by "[redacted]". */
  scrub(text: string): string {
    if (this.known.size === 0 || text.length === 0) return text;
    const hay = fold(text);
    const hidden = new Uint8Array(text.length);
    for (let i = 0; i + MIN_FRAGMENT <= hay.length; i++) {
      if (this.pieces.has(hay.slice(i, i + MIN_FRAGMENT))) hidden.fill(1, i, i + MIN_FRAGMENT);
    }
    if (this.atLineEdges) keepLineEdges(text, hidden);
    for (const form of this.whole) {
      for (let at = hay.indexOf(form); at !== -1; at = hay.indexOf(form, at + 1)) hidden.fill(1, at, at + form.length);
    }
    let out = '';
    for (let i = 0; i < text.length; i++) {
      if (!hidden[i]) out += text[i];
      else if (i === 0 || !hidden[i - 1]) out += MARK;
    }
    return out;
  }
}

/** Clears every run of `hidden` that neither starts nor ends a line of `text`. */
function keepLineEdges(text: string, hidden: Uint8Array): void {
  for (let start = 0; start < text.length; start++) {
    if (!hidden[start]) continue;
    let end = start;
    while (end < text.length && hidden[end]) end++;
    const startsLine = start === 0 || text[start - 1] === '\n';
    const endsLine = end === text.length || text[end] === '\n' || text[end] === '\r';
    if (!startsLine && !endsLine) hidden.fill(0, start, end);
    start = end;
  }
}

/** `text` with every form and every long enough piece of each secret replaced by "[redacted]". */
export function scrubSecrets(text: string, secrets: readonly string[] | SecretScrubber): string {
  return (secrets instanceof SecretScrubber ? secrets : new SecretScrubber(secrets)).scrub(text);
}

/** `NAME=value`, `NAME: value`, `"NAME": "value"` for names that hold keys, and `--api-key value`, `Bearer value`. */
const NAMED_KEY =
  /((?:CONTAINER_API_KEY|VAST_API_KEY|API_KEY|api[_-]?key|instance_api_key)["']?\s*[=:]\s*["']?|--api-key[=\s]+["']?|Bearer\s+)([^\s"',;]+)/gi;
/** A run of 32 or more hex digits: the shape of the service's keys (64 hex digits). */
const HEX_RUN = /(?<![0-9a-z])[0-9a-f]{32,}(?![0-9a-z])/gi;

/**
 * For text that may hold a key berth does not know: values given to key-holding names are replaced
 * always; with `unknownKey`, every run of 32+ hex digits too (digests included: over-redaction only).
 */
export function scrubKeyShapes(text: string, unknownKey: boolean): string {
  const named = text.replace(NAMED_KEY, (_m, name: string, value: string) => (value === MARK ? `${name}${value}` : `${name}${MARK}`));
  return unknownKey ? named.replace(HEX_RUN, MARK) : named;
}
