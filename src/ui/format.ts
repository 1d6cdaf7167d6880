// How the dashboard writes money, times and states for people: money always with its unit, times
// in the reader's own zone with how long ago, states in words (colour only repeats them).
import type { RunState } from '../wire/run-states.js';

export const usd = (n: number | null | undefined, digits = 2): string =>
  n === null || n === undefined ? '—' : `${n < 0 ? '−' : ''}$${Math.abs(n).toFixed(digits)}`;
export const usdPerHour = (n: number | null | undefined): string => (n === null || n === undefined ? '—' : `$${n.toFixed(3)}/h`);

/** An offer's GPUs as the run object writes them: "RTX 4090", or "2× RTX 4090" for more than one. */
export const gpuText = (name: string, count: number | null): string => (count !== null && count > 1 ? `${count}× ${name}` : name);

/** "3 min", "2 h 5 min", "4 d 1 h". */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** "5 min ago" from an ISO time, given now (ms). */
export const ago = (iso: string, now: number): string => `${duration(now - Date.parse(iso))} ago`;

/** The reader's local date and time, to the second. */
export const localTime = (iso: string): string =>
  new Date(iso).toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });

/** Each state's word and its tone (a CSS class); the word is what tells it. */
const TONES: Record<RunState, string> = {
  queued: 'wait',
  searching: 'busy',
  creating: 'busy',
  booting: 'busy',
  rebidding: 'warn',
  running: 'good',
  collecting: 'busy',
  keeping: 'warn',
  destroying: 'busy',
  succeeded: 'good',
  failed: 'bad',
  cancelled: 'quiet',
  expired: 'bad',
};
export const stateTone = (s: RunState): string => TONES[s] ?? 'quiet';

/** An attempt's outcome in a tone: running or still going is good/busy, a cancel quiet, the rest bad. */
export function outcomeTone(outcome: string | null): string {
  if (outcome === null) return 'busy';
  if (outcome === 'running' || outcome === 'succeeded') return 'good';
  if (outcome === 'cancelled') return 'quiet';
  return 'bad';
}
