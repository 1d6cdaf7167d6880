// The instance record as the service shows it (list, show, v1 list). Kept apart from the store so
// the wire shape is in one place; the official CLI fails on records without `extra_env`.
import type { LiveInstance } from './instances.js';

export type InstanceRecord = Record<string, unknown>;

export function instanceRecord(inst: LiveInstance): InstanceRecord {
  const { hist, offer, params } = inst;
  const running = inst.status === 'running';
  const direct = offer.direct_port_count > 0;
  // Without direct ports the service reaches the container through its SSH proxy hosts.
  const sshHost = direct ? offer.public_ipaddr : `ssh${(hist.id % 9) + 1}.proxy.sim.invalid`;
  const curState = inst.status === 'running' || inst.status === 'loading' ? 'running' : inst.intended === 'stopped' ? 'stopped' : 'unloaded';
  return {
    id: hist.id,
    machine_id: hist.machine_id,
    host_id: hist.host_id,
    actual_status: inst.status,
    intended_status: inst.intended,
    cur_state: curState,
    next_state: inst.intended,
    status_msg: inst.msg,
    label: hist.label,
    image_uuid: params.image,
    image_runtype: params.runtype,
    onstart: params.onstart,
    ssh_host: sshHost,
    ssh_port: inst.sshPort,
    public_ipaddr: offer.public_ipaddr,
    ports: running ? { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: String(inst.sshPort) }] } : {},
    direct_port_count: offer.direct_port_count,
    dph_total: round4(hist.compute_dph + hist.disk_dph),
    dph_base: hist.compute_dph,
    storage_cost: offer.storage_cost,
    is_bid: hist.is_bid,
    min_bid: offer.min_bid,
    start_date: hist.created_at.wall_ms / 1000,
    gpu_name: offer.gpu_name,
    num_gpus: offer.num_gpus,
    gpu_ram: offer.gpu_ram,
    gpu_totalram: offer.gpu_total_ram,
    cpu_name: offer.cpu_name,
    cpu_cores_effective: offer.cpu_cores_effective,
    cpu_ram: offer.cpu_ram,
    disk_space: params.disk,
    geolocation: offer.geolocation,
    reliability2: offer.reliability2,
    verification: offer.verification,
    extra_env: Object.entries(params.env),
  };
}

const round4 = (x: number) => Math.round(x * 10_000) / 10_000;
