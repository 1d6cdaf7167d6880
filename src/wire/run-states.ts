// The states of a run (docs/runs.md), as the store records them and the control API and the CLI
// show them. Part of the control API's wire contract (./control-api.ts), kept apart without zod so
// that the CLI can load it in a few milliseconds.
export const RUN_STATES = [
  'queued',
  'searching',
  'creating',
  'booting',
  'rebidding',
  'running',
  'collecting',
  'keeping',
  'destroying',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
] as const;
export type RunState = (typeof RUN_STATES)[number];

const END_STATES = ['succeeded', 'failed', 'cancelled', 'expired'] as const satisfies readonly RunState[];
const ENDS: ReadonlySet<string> = new Set(END_STATES);

/** A run in an end state holds no instance and never moves again. */
export const isEndState = (state: string): boolean => ENDS.has(state);

/** A run stops moving on its own once it is running or has ended. */
export const isSettled = (state: string): boolean => state === 'running' || isEndState(state);

/**
 * An attempt is live while it has no outcome yet or its outcome is `running` (its instance came up
 * and the run holds it); any other outcome ended it. Takes the store's row and the wire's attempt alike.
 */
export const attemptIsLive = (attempt: { readonly outcome: string | null }): boolean =>
  attempt.outcome === null || attempt.outcome === 'running';

/** What a daemon needs to drive a run this berth cannot read (`Run.unreadable`): the CLI and the dashboard say it alike. */
export function keptRunNeeds(u: { needs_spec_version: number | null; needs_machine_version: number | null }): string {
  const versions = [
    ...(u.needs_spec_version !== null ? [`stored spec version ${u.needs_spec_version}`] : []),
    ...(u.needs_machine_version !== null ? [`run machine version ${u.needs_machine_version}`] : []),
  ];
  return versions.length > 0 ? `a berth that reads ${versions.join(' and ')}` : 'a berth whose job spec rules accept it';
}

/** A warm instance's line on the dashboard (issue #51): what it bills, until when. */
export function warmText(warm: { instance_id: number; state: 'warm' | 'released'; until: string; usd_per_hour: number }): string {
  const at = new Date(warm.until).toLocaleTimeString('en-GB', { hour12: false });
  return warm.state === 'warm'
    ? `instance ${warm.instance_id} kept warm for the next run of this spec until ${at}, $${warm.usd_per_hour.toFixed(3)}/h meanwhile`
    : `instance ${warm.instance_id} no longer kept warm: being destroyed`;
}

/** A kept instance's line, the CLI's and the dashboard's alike: `kept for SSH until 14:05:09 (keep_on_failure_s)`. */
export function keptForSshText(keepUntil: string): string {
  const at = new Date(keepUntil).toLocaleTimeString('en-GB', { hour12: false });
  return `kept for SSH until ${at} (keep_on_failure_s)`;
}
