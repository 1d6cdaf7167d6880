// Normalization at the edge (issue #30, cases 1 and 2): the client hands berth trimmed strings and
// null for the service's "unknown" -1, whatever the service sent.
import { describe, expect, it } from 'vitest';
import { normalizeInstance, normalizeOffer } from '../../../src/client/normalize.js';

describe('normalizeInstance', () => {
  it('trims every string at any depth, as the official CLI does', () => {
    expect(
      normalizeInstance({
        id: 1,
        public_ipaddr: '203.0.113.7\n',
        ssh_host: ' ssh4.vast.ai ',
        local_ipaddrs: '10.2.202.31 172.17.0.1 \n',
        actual_status: 'running ',
        ports: { '22/tcp': [{ HostIp: '0.0.0.0 ', HostPort: '40022\n' }] },
        extra_env: [['A ', ' b']],
      }),
    ).toEqual({
      id: 1,
      public_ipaddr: '203.0.113.7',
      ssh_host: 'ssh4.vast.ai',
      local_ipaddrs: '10.2.202.31 172.17.0.1',
      actual_status: 'running',
      ports: { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: '40022' }] },
      extra_env: [['A', 'b']],
    });
  });

  it('reads a negative figure as unknown (null), and keeps real ones', () => {
    expect(
      normalizeInstance({ id: 1, gpu_util: -1, disk_util: -1, disk_usage: -1, direct_port_start: -1, direct_port_end: -1, cpu_util: 12.5 }),
    ).toEqual({ id: 1, gpu_util: null, disk_util: null, disk_usage: null, direct_port_start: null, direct_port_end: null, cpu_util: 12.5 });
    expect(normalizeInstance({ id: 1, gpu_util: 0 })).toEqual({ id: 1, gpu_util: 0 });
  });

  it('gives a numeric HostPort as the documented string, and reads no other number from a string', () => {
    expect(normalizeInstance({ id: 1, ports: { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: 40022 }] }, ssh_port: '10600' })).toEqual({
      id: 1,
      ports: { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: '40022' }] },
      ssh_port: '10600',
    });
  });

  it("reads ports given as a list (show_instance.yaml's own example) as no host mapping", () => {
    expect(normalizeInstance({ id: 1, ports: [8080, 8081] })).toEqual({ id: 1, ports: null });
  });

  it('leaves what is not a record alone', () => {
    expect(normalizeInstance(null)).toBeNull();
    expect(normalizeInstance(' x ')).toBe(' x ');
  });
});

describe('normalizeOffer', () => {
  it('trims strings and keeps a price that is not a number as sent (the offer stays unusable)', () => {
    expect(normalizeOffer({ id: 1, gpu_name: 'RTX 4090 ', dph_total: '0.5' })).toEqual({ id: 1, gpu_name: 'RTX 4090', dph_total: '0.5' });
  });
});
