// The v1 instance list (`GET /api/v1/instances/`, the only documented list): one page, or every
// page in turn. Only the columns berth reads travel.
import { BerthError } from '../errors.js';
import { keepInstances, ItemReport } from './record-items.js';
import { listV1ResponseSchema, parseBody } from './records.js';
import type { ServiceCaller } from './service-call.js';
import type { Instance, InstanceFilters, InstancePage, InstancePageQuery, MarketplaceClient } from './types.js';

/** The v1 list's largest page (show_instances.yaml: default 25, max 25). */
const V1_PAGE_SIZE = 25;
/** A list (or a charges report) longer than this many pages is taken as the service looping. */
export const MAX_V1_PAGES = 10_000;

/**
 * The columns berth reads of an instance, asked for with `select_cols` so a list of 1,000 instances
 * is a few dozen KB instead of ~1 MB: the status fields the run machine decides on (`actual_status`,
 * `intended_status`, `cur_state`, and `status_msg` for the "OCI runtime create failed" case), the
 * label (ownership and the look-up of creates with an unknown outcome), the SSH endpoints shown to
 * the user and probed for readiness (the proxy `ssh_host`/`ssh_port`, the direct `public_ipaddr` +
 * `ports`), the billed `dph_total` shown in status, `machine_id`, and `gpu_util` (idle autostop). Never `extra_env` or `onstart`:
 * env values (secrets) do not even travel.
 */
export const INSTANCE_COLUMNS = [
  'id',
  'label',
  'machine_id',
  'actual_status',
  'intended_status',
  'cur_state',
  'status_msg',
  'ssh_host',
  'ssh_port',
  'public_ipaddr',
  'ports',
  'dph_total',
  'gpu_util',
] as const;

/** Keyset order of every list: by id, so a walk over the pages is stable and new instances come last. */
const ORDER_BY = JSON.stringify([{ col: 'id', dir: 'asc' }]);
const SELECT_COLS = JSON.stringify(INSTANCE_COLUMNS);

function listPath(query: InstancePageQuery): string {
  const params = new URLSearchParams({ limit: String(V1_PAGE_SIZE), order_by: ORDER_BY, select_cols: SELECT_COLS });
  if (query.filters && Object.keys(query.filters).length > 0) params.set('select_filters', JSON.stringify(query.filters));
  if (query.afterToken) params.set('after_token', query.afterToken);
  return `/api/v1/instances/?${params.toString()}`;
}

export function instanceListCalls({ call, reportItems }: ServiceCaller): Pick<MarketplaceClient, 'listInstancePage' | 'listInstances'> {
  async function listPage(query: InstancePageQuery, signal: AbortSignal | undefined): Promise<InstancePage> {
    const res = await call({ op: 'list', group: 'list', method: 'GET', path: listPath(query), signal });
    const body = parseBody(listV1ResponseSchema, res.body, 'GET /api/v1/instances/');
    const report = new ItemReport();
    const instances = keepInstances(body.instances, 'instances', report);
    reportItems('list', 'list', report);
    const next = body.next_token ?? null;
    return {
      instances,
      nextToken: next === null || next === '' ? null : String(next),
      total: body.total_instances ?? null,
    };
  }

  async function listAll(filters: InstanceFilters | undefined, signal: AbortSignal | undefined): Promise<Instance[]> {
    const byId = new Map<number, Instance>();
    const seenTokens = new Set<string>();
    let afterToken: string | null = null;
    for (let page = 0; page < MAX_V1_PAGES; page++) {
      const got: InstancePage = await listPage({ ...(filters ? { filters } : {}), afterToken }, signal);
      // An instance may move between pages while we walk them: keep the latest record per id.
      for (const inst of got.instances) byId.set(inst.id, inst);
      if (got.nextToken === null) return [...byId.values()];
      if (seenTokens.has(got.nextToken)) throw new BerthError('bad_response', 'The v1 instance list repeated a page token.');
      seenTokens.add(got.nextToken);
      afterToken = got.nextToken;
    }
    throw new BerthError('bad_response', `The v1 instance list did not end after ${MAX_V1_PAGES} pages.`);
  }

  return {
    listInstancePage: (query, opts) => listPage(query, opts?.signal),
    listInstances: (filters, opts) => listAll(filters, opts?.signal),
  };
}
