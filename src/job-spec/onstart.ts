// The service takes an `onstart` script of at most 4048 characters. A longer script is sent as a
// short POSIX sh wrapper holding the gzip+base64-encoded original:
//
//   echo '<base64>' | base64 -d | gunzip -c > "${TMPDIR:-/tmp}/berth-onstart.$$.sh" && . "${TMPDIR:-/tmp}/berth-onstart.$$.sh"
//
// Why this shape:
// - The original is *sourced* with `.`, so it runs in the very shell the service uses for onstart
//   (sh or bash, whichever that is), with the same environment, working directory and stdin. Piping
//   the decoded text into a shell (`| bash`) would hand the script the pipe as its stdin, so any
//   command in it that reads stdin would swallow the rest of the script.
// - The file name carries the shell's pid (`$$`), so scripts of several instances sharing one /tmp
//   (the simulator runs them as local processes) never overwrite each other.
// - The file is left in place: it is the user's own script, which the service keeps anyway.
import { gzipSync } from 'node:zlib';
import { SpecError } from '../errors.js';
import { CREATE_INPUT_LIMITS, sizeOf as size } from './create-input-limits.js';

/**
 * The service's limit on `onstart`, in characters: its own, and the one on `args` + `args_str` +
 * `onstart` together, of which berth sends `onstart` alone (create-input-limits.ts).
 */
export const ONSTART_MAX_CHARS = Math.min(CREATE_INPUT_LIMITS.onstartMaxChars, CREATE_INPUT_LIMITS.createTextTotalMaxChars);

function wrap(script: string): string {
  const encoded = gzipSync(Buffer.from(script, 'utf8'), { level: 9 }).toString('base64');
  const file = '"${TMPDIR:-/tmp}/berth-onstart.$$.sh"';
  // base64 text has no quote characters, so single quotes keep it literal.
  return `echo '${encoded}' | base64 -d | gunzip -c > ${file} && . ${file}\n`;
}

/** Whether `script` can be sent at all: as it is, or compressed into a wrapper within the limit. */
export function onstartFits(script: string): boolean {
  return size(script) <= ONSTART_MAX_CHARS || size(wrap(script)) <= ONSTART_MAX_CHARS;
}

/**
 * The `onstart` to send for `script`: the script itself when it fits the service's limit,
 * otherwise the wrapper described at the top of this file. Throws SpecError (path `$.onstart`)
 * when even the compressed script does not fit; validation refuses such specs up front.
 */
export function encodeOnstart(script: string): string {
  if (size(script) <= ONSTART_MAX_CHARS) return script;
  const wrapper = wrap(script);
  if (size(wrapper) > ONSTART_MAX_CHARS) {
    throw new SpecError([{ path: '$.onstart', message: ONSTART_TOO_LARGE }]);
  }
  return wrapper;
}

export const ONSTART_TOO_LARGE =
  `too large: even gzip+base64-compressed it exceeds the service's ${ONSTART_MAX_CHARS}-character limit; ` +
  'put the script in the image or download it from onstart';

/**
 * The `onstart` to send when berth runs `line` after the user's script (the readiness callback):
 * the script, a blank line (so that a trailing backslash cannot join the two) and the line, sent
 * as they are or compressed together (the wrapper sources the script, so the line runs once it has
 * run, in the same shell). Null when even compressed they do not fit the service's limit: the
 * caller then sends the script alone.
 */
export function encodeOnstartWith(script: string | undefined, line: string): string | null {
  try {
    return encodeOnstart(script ? `${script}\n\n${line}\n` : `${line}\n`);
  } catch {
    return null;
  }
}
