// A file name as the CLI shows it in a line of text: a name may hold any byte but '/' and NUL, and a
// newline or a tab in one (a task's `touch "$(printf 'a\nb')"`) would break a table row or a list
// into lines of their own. So the backslash and the characters that move the cursor are shown as
// their escapes (`a\nb`), as `ls -b` does; the rest of the control characters are escaped by Io on
// every line anyway (./io.ts safeText). JSON output carries the name as it is (JSON escapes it).
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

export function shownName(name: string): string {
  return name.replace(/[\\\n\r\t]/g, (c) => ESCAPES[c]!);
}
