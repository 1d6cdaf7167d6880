// Removes secrets (the API key, env values) from service text before berth quotes any of it. The
// service may echo what it was sent, and not only verbatim: in another letter case, JSON-escaped
// (a JSON string inside a message, or Python's \uXXXX escapes), URL-encoded, or cut short by its own
// truncation. So any run of the text, of at least MIN_FRAGMENT characters, that is a piece of a
// secret in one of those forms, compared without case, is replaced. A secret shorter than
// MIN_FRAGMENT is replaced only whole, and one shorter than MIN_SECRET (a "1", a "true") is not
// sought: it would blank out ordinary words and tells nothing on its own.
//
// Over-redaction is harmless (the text is only ever a message); a missed fragment is not.

/** Shortest secret worth seeking. */
export const MIN_SECRET = 4;
/** Shortest piece of a longer secret that is replaced. */
export const MIN_FRAGMENT = 6;
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

/** `text` with every form and every long enough piece of each secret replaced by "[redacted]". */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  const sought = secrets.filter((s) => s.length >= MIN_SECRET);
  if (sought.length === 0 || text.length === 0) return text;
  const hay = fold(text);
  const hidden = new Uint8Array(text.length);
  for (const form of sought.flatMap(formsOf)) {
    const min = Math.min(MIN_FRAGMENT, form.length);
    for (let i = 0; i + min <= hay.length; i++) {
      if (!form.includes(hay.slice(i, i + min))) continue;
      let end = i + min;
      while (end < hay.length && form.includes(hay.slice(i, end + 1))) end++;
      hidden.fill(1, i, end);
    }
  }
  let out = '';
  for (let i = 0; i < text.length; i++) {
    if (!hidden[i]) out += text[i];
    else if (i === 0 || !hidden[i - 1]) out += MARK;
  }
  return out;
}
