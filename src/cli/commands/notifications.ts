// `berth notifications [--json] [--state STATE]`: the outbound notification deliveries (config
// `notify`), newest first: pending (with their next try), delivered, dead (with the last error).
import { connectToDaemon } from '../control-client.js';
import { EXIT } from '../exit-codes.js';
import { printJson, type Io } from '../io.js';
import { formatDuration, table } from '../render.js';
import type { Notification } from '../../wire/control-api.js';

export interface NotificationsOptions {
  json?: boolean;
  state?: string;
}

/** Delivered ones shown to people (all of them with --json or --state delivered). */
const DELIVERED_SHOWN = 20;

export async function notificationsCommand(options: NotificationsOptions, io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  const client = connectToDaemon(env);
  const all: Notification[] = [];
  for (let before: number | undefined; ;) {
    const page = await client.notifications({
      ...(before === undefined ? {} : { before }),
      ...(options.state ? { state: options.state } : {}),
    });
    if (page.length === 0) break;
    all.push(...page);
    before = page.at(-1)!.seq;
  }
  if (options.json) {
    printJson(io, all);
    return EXIT.ok;
  }
  notificationLines(all, Date.now(), options.state === 'delivered').forEach((l) => io.out(l));
  return EXIT.ok;
}

export function notificationLines(all: Notification[], now: number, allDelivered: boolean): string[] {
  const count = (s: Notification['state']) => all.filter((n) => n.state === s).length;
  if (all.length === 0) return ['No notifications: none sent yet, or no `notify` targets in the config.'];
  const lines = [`${count('pending')} pending, ${count('delivered')} delivered, ${count('dead')} dead`, ''];
  let delivered = 0;
  const shown = all.filter((n) => n.state !== 'delivered' || allDelivered || delivered++ < DELIVERED_SHOWN);
  const rows = shown.map((n) => [
    n.id.slice(0, 8),
    n.type,
    n.run_id,
    `#${n.target} ${n.target_origin}`,
    n.state,
    String(n.attempts),
    `${formatDuration(now - Date.parse(n.created_at))} ago`,
    n.state === 'pending' && n.next_at
      ? `next try in ${formatDuration(Date.parse(n.next_at) - now)}${n.last_error ? ` (last: ${n.last_error})` : ''}`
      : (n.last_error ?? ''),
  ]);
  lines.push(...table(['ID', 'EVENT', 'RUN', 'TARGET', 'STATE', 'TRIES', 'MADE', 'DETAIL'], rows));
  if (shown.length < all.length)
    lines.push('', `(${all.length - shown.length} older delivered ones not shown: --state delivered or --json shows them)`);
  return lines;
}
