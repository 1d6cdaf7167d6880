// The instance record as the service shows it (list, show, v1 list). Kept apart from the store so
// the wire shape is in one place; the official CLI fails on records without `extra_env`.
import type { LiveInstance } from './instances.js';

export type InstanceRecord = Record<string, unknown>;

/** The SSH proxy hosts' domain: shaped like the service's `ssh5.vast.ai`, never resolvable. */
const SSH_PROXY_DOMAIN = 'vast-sim.invalid';

/** Whether the runtype asks for direct connections (`ssh_direct`, the CLI's `ssh_direc`, jupyter's). */
export function wantsDirect(runtype: string): boolean {
  return runtype.split(/\s+/).some((t) => t.endsWith('_direc') || t.endsWith('_direct'));
}

export function instanceRecord(inst: LiveInstance): InstanceRecord {
  const { hist, offer, params } = inst;
  const running = inst.status === 'running';
  const ssh = sshOf(inst);
  // An outbid instance is stopped (cur_state) but still meant to run (intended/next_state).
  const curState =
    inst.status === 'running' || inst.status === 'loading' || inst.status === 'rebooting'
      ? 'running'
      : inst.intended === 'stopped' || inst.status === 'stopped'
        ? 'stopped'
        : 'unloaded';
  const record: InstanceRecord = {
    id: hist.id,
    machine_id: hist.machine_id,
    host_id: hist.host_id,
    bundle_id: offer.bundle_id,
    actual_status: inst.status,
    intended_status: inst.intended,
    cur_state: curState,
    next_state: inst.intended,
    status_msg: inst.msg,
    label: hist.label,
    template_hash_id: params.template_hash_id,
    image_uuid: params.image,
    image_args: params.args,
    image_runtype: params.runtype,
    onstart: params.onstart,
    // The service's SSH proxy: always there, whatever the runtype.
    ssh_host: ssh.proxyHost,
    ssh_idx: ssh.idx,
    ssh_port: ssh.proxyPort,
    public_ipaddr: ssh.publicIp,
    direct_port_count: offer.direct_port_count,
    direct_port_start: ssh.directStart,
    direct_port_end: ssh.directEnd,
    static_ip: offer.static_ip,
    dph_total: hist.compute_dph + hist.disk_dph,
    dph_base: hist.compute_dph,
    storage_cost: offer.storage_cost,
    storage_total_cost: hist.disk_dph,
    is_bid: hist.is_bid,
    min_bid: offer.min_bid,
    start_date: hist.created_at.wall_ms / 1000,
    end_date: offer.end_date,
    gpu_name: offer.gpu_name,
    gpu_arch: offer.gpu_arch,
    num_gpus: offer.num_gpus,
    gpu_ram: offer.gpu_ram,
    gpu_totalram: offer.gpu_total_ram,
    gpu_frac: offer.gpu_frac,
    cpu_arch: offer.cpu_arch,
    cpu_name: offer.cpu_name,
    cpu_cores: offer.cpu_cores,
    cpu_cores_effective: offer.cpu_cores_effective,
    cpu_ram: offer.cpu_ram,
    disk_space: params.disk,
    geolocation: offer.geolocation,
    reliability2: offer.reliability2,
    verification: offer.verification,
    external: offer.external,
    extra_env: params.envPairs,
    gpu_util: gpuUtil(inst),
    // Not modelled: unknown (show_instance.yaml writes them -1; the record quirk sends -1, else null).
    disk_util: null,
    disk_usage: null,
  };
  // show_instances.yaml: "Port mappings. Only present on running instances."
  if (running) record.ports = ssh.directStart > 0 ? portMap(ssh.directStart, params.ports.slice(0, ssh.directEnd - ssh.directStart)) : {};
  return record;
}

/**
 * Where SSH answers: the proxy (`sshN.<domain>`, a port per instance) always; a direct port range
 * on the host only when the runtype asks for direct connections and the offer has direct ports
 * (-1 otherwise, as the service shows). With SSH listeners, 127.0.0.1 and the listeners' ports.
 */
function sshOf(inst: LiveInstance) {
  const id = inst.hist.id;
  const idx = String(1 + (id % 9));
  const direct = wantsDirect(inst.params.runtype) && inst.offer.direct_port_count > 0;
  const width = Math.min(inst.offer.direct_port_count, 1 + inst.params.ports.length);
  // With ssh_listeners on, both addresses are real loopback listeners (ssh-listeners.ts).
  const live = inst.sshPorts;
  const directStart = !direct ? -1 : live ? live.directPort : 20_000 + ((id * 7) % 40_000);
  return {
    idx,
    proxyHost: live ? LOOPBACK : `ssh${idx}.${SSH_PROXY_DOMAIN}`,
    proxyPort: live ? live.proxyPort : 10_000 + (id % 50_000),
    publicIp: live ? LOOPBACK : inst.offer.public_ipaddr,
    directStart,
    directEnd: direct ? directStart + width - 1 : -1,
  };
}

const LOOPBACK = '127.0.0.1';

/**
 * GPU utilisation "as a fraction" (show_instance.yaml; the official CLI prints it as a percent, so
 * the documented fraction is the stricter reading: a client taking it for a percent sees a busy GPU
 * as idle): 0.97 while its onstart script (a task) runs, 0.004 otherwise; null where the host reports none.
 */
function gpuUtil(inst: LiveInstance): number | null {
  if (inst.hist.profile === 'no_gpu_util') return null;
  if (inst.status !== 'running') return 0;
  return inst.gpuBusy ? 0.97 : 0.004;
}

/** `22/tcp` on the first direct port, then the container's extra ports in order. */
function portMap(start: number, extra: string[]): Record<string, Array<{ HostIp: string; HostPort: string }>> {
  const map: Record<string, Array<{ HostIp: string; HostPort: string }>> = {};
  ['22/tcp', ...extra].forEach((port, i) => {
    map[port] ??= [{ HostIp: '0.0.0.0', HostPort: String(start + i) }];
  });
  return map;
}
