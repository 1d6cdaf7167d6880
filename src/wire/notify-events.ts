// The run events a notification can be sent for (config `notify[].events`), part of the control
// API's wire contract. Kept apart without zod, like ./run-states.ts, so that the config and the CLI
// load it cheaply. Which machine event becomes which of these is src/daemon/notify/notify-events.ts's.
export const NOTIFY_EVENTS = [
  'run.running', // the run reached `running` (its instance is ready)
  'attempt.failed', // an attempt ended on a failure that counts against max_attempts (exited, boot_timeout, ...)
  'instance.lost', // a running instance was lost; the run searches again
  'run.failed', // the run ended `failed`
  'run.cancelled', // the run ended `cancelled`
  'run.expired', // the run ended `expired` (max_runtime_s or budget_usd reached; issue #11)
  'budget.warning', // a budget is nearly spent (issue #11)
  'run.succeeded', // the run's task exited 0 (issue #19)
  'run.task_failed', // the run ended `failed` because its task exited non-zero, every restart spent (issue #19)
  'idle.warning', // the run's instance has been idle long enough to be destroyed soon (idle_timeout_s, issue #19)
] as const;
export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

/** The states of one delivery in the outbox. */
export const DELIVERY_STATES = ['pending', 'delivered', 'dead'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];
