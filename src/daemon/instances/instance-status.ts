// What the run machine is told of an instance, from the service's record of it.
import type { InstanceStatus } from '../../../machines/run-rules.js';
import type { Instance } from '../../client/types.js';

export function toStatus(inst: Instance): InstanceStatus {
  return {
    id: inst.id,
    actual_status: inst.actual_status,
    intended_status: inst.intended_status ?? null,
    cur_state: inst.cur_state ?? null,
    status_msg: inst.status_msg ?? null,
    ssh_host: inst.ssh_host ?? null,
    ssh_port: inst.ssh_port ?? null,
    dph_total: inst.dph_total ?? null,
    // What a stopped instance bills (src/store/spend.ts, billedDph); a loose field of the record.
    storage_total_cost: price(inst['storage_total_cost']),
    // The direct SSH endpoint (public_ipaddr + ports["22/tcp"]), probed for readiness with the proxy.
    public_ipaddr: inst.public_ipaddr ?? null,
    ports: inst.ports ?? null,
  };
}

function price(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;
}
