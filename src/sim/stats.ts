// Counters for tests and the chaos suite: what the simulator was asked and what it answered.

export interface SimStats {
  /** Requests per route name (e.g. "PUT /api/v0/asks/{id}/"); unmatched ones under "unmatched". */
  requests: Record<string, number>;
  /** 429 answers per route name. */
  rate_limited: Record<string, number>;
  /** Status codes answered, per code. */
  statuses: Record<string, number>;
  /** Status codes answered per route: where a client's calls went and what came of them. */
  answers: Record<string, Record<string, number>>;
  creates_received: number;
  /** Creates received per label ("" when none). */
  creates_by_label: Record<string, number>;
  /** Creates that made an instance and answered it (ambiguous ones are made but not answered). */
  creates_answered: number;
  creates_ambiguous: number;
  offers_taken: number;
  /** Creates that lost their offer to another account's create on it (faults.double_buy_rate). */
  offers_double_bought: number;
  drops: number;
  injected_5xx: number;
}

export function emptyStats(): SimStats {
  return {
    requests: {},
    rate_limited: {},
    statuses: {},
    answers: {},
    creates_received: 0,
    creates_by_label: {},
    creates_answered: 0,
    creates_ambiguous: 0,
    offers_taken: 0,
    offers_double_bought: 0,
    drops: 0,
    injected_5xx: 0,
  };
}

export function bump(map: Record<string, number>, key: string): void {
  map[key] = (map[key] ?? 0) + 1;
}

/** Counts one answer of `status` to the route, overall and per route. */
export function countAnswer(stats: SimStats, route: string, status: number): void {
  bump(stats.statuses, String(status));
  bump((stats.answers[route] ??= {}), String(status));
}
