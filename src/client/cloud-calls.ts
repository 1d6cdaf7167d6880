// The account's cloud connections and the service's cloud copy, on the official client's paths and
// bodies (vast-ai/vast-cli vastai/api/storage.py: `show_connections` GET /users/cloud_integrations/,
// `cloud_copy` POST /commands/rclone/ `{src, dst, instance_id, selected, transfer, flags}`).
// The copy answers at once; how its end is seen is ./cloud-copy-status.ts.
import { BerthError } from '../errors.js';
import { ItemReport, keepValid } from './record-items.js';
import { cloudConnectionSchema, cloudConnectionsResponseSchema, parseBody } from './records.js';
import type { ServiceCaller } from './service-call.js';
import type { CloudCopyRequest, MarketplaceClient } from './types.js';

const TRANSFERS: ReadonlySet<string> = new Set(['Instance To Cloud', 'Cloud To Instance']);

export function cloudCalls({ call, reportItems }: ServiceCaller): Pick<MarketplaceClient, 'listCloudConnections' | 'startCloudCopy'> {
  return {
    async listCloudConnections(opts) {
      // show_connections.yaml: a bare array of {id, cloud_type, name}; user_read (permissions.mdx,
      // "Show Connections"). A read of the account: the `other` group, as users/current and the SSH keys.
      const path = '/api/v0/users/cloud_integrations/';
      const res = await call({ op: 'cloud_connections', group: 'other', method: 'GET', path, signal: opts?.signal });
      const report = new ItemReport();
      const rows = keepValid(
        cloudConnectionSchema,
        parseBody(cloudConnectionsResponseSchema, res.body, `GET ${path}`),
        'connections',
        report,
      );
      reportItems('cloud_connections', 'other', report);
      return rows.map((c) => ({ id: c.id, name: c.name.trim(), type: (c.cloud_type ?? '').trim() }));
    },

    async startCloudCopy(request, opts) {
      checkRequest(request);
      // cloud_copy.yaml types `instance_id` and `selected` as strings, and the CLI sends them so
      // (vast.py `cloud copy --instance/--connection`, type=str); `flags: []` as the CLI's default.
      // instance_write (permissions.mdx, "Cloud Copy"). A write to one instance: the `change` group,
      // with the stop that comes before it (cloud_copy.yaml documents no rate limit).
      // Retried like the other writes after a lost answer: a copy sent twice copies the same files
      // to the same place, and rclone's copy "does not transfer files that are identical on source and
      // destination" (rclone.org/commands/rclone_copy).
      await call({
        op: 'cloud_copy',
        group: 'change',
        method: 'POST',
        path: '/api/v0/commands/rclone/',
        body: {
          src: request.src,
          dst: request.dst,
          instance_id: String(request.instanceId),
          selected: String(request.connectionId),
          transfer: request.transfer,
          flags: [],
        },
        signal: opts?.signal,
      });
    },
  };
}

/** Bad input is refused before anything is sent, naming the field. */
function checkRequest(r: CloudCopyRequest): void {
  const bad = (field: string, what: string) => new BerthError('bad_request', `startCloudCopy: ${field} must be ${what}`);
  if (!Number.isSafeInteger(r.instanceId) || r.instanceId <= 0) throw bad('instanceId', 'a positive integer');
  if (!Number.isSafeInteger(r.connectionId) || r.connectionId <= 0) throw bad('connectionId', 'a positive integer');
  if (typeof r.src !== 'string' || r.src.trim() === '') throw bad('src', 'a path');
  if (typeof r.dst !== 'string' || r.dst.trim() === '') throw bad('dst', 'a path');
  if (!TRANSFERS.has(r.transfer)) throw bad('transfer', '"Instance To Cloud" or "Cloud To Instance"');
}
