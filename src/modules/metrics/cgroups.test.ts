import { describe, expect, it } from 'vitest';
import { netDev, statValue } from './cgroups.js';
import { bucket } from './metrics.service.js';

describe('cgroup and proc files', () => {
  it('reads a key of a `key value` file', () => {
    const stat = 'cache 12\nrss 300\ntotal_inactive_file 4096\ninactive_file 10\n';
    expect(statValue(stat, 'total_inactive_file')).toBe(4096);
    expect(statValue(stat, 'inactive_file')).toBe(10);
    expect(statValue('usage_usec 1500\nuser_usec 1000\n', 'usage_usec')).toBe(1500);
    expect(statValue(stat, 'missing')).toBeNull();
  });

  it('sums the bytes of every interface but the loopback', () => {
    const dev = [
      'Inter-|   Receive                                                |  Transmit',
      ' face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed',
      '    lo:  999999      10    0    0    0     0          0         0   999999      10    0    0    0     0       0          0',
      '  eth0:    1200       8    0    0    0     0          0         0      340       4    0    0    0     0       0          0',
      '  eth1:      30       1    0    0    0     0          0         0        5       1    0    0    0     0       0          0',
    ].join('\n');
    expect(netDev(dev)).toEqual({ rx: 1230, tx: 345 });
  });
});

describe('metrics steps', () => {
  it('averages CPU and memory and sums bytes per step', () => {
    const m = (minute: string, cpu: number, memory: number, rx: number) => ({ resource_id: 'p', minute, cpu_millicores: cpu, memory_bytes: memory, memory_limit_bytes: null, rx_bytes: rx, tx_bytes: 1, samples: 6 });
    const points = bucket([m('2027-01-01T10:00:00.000Z', 100, 1000, 5), m('2027-01-01T10:05:00.000Z', 300, 3000, 7), m('2027-01-01T10:15:00.000Z', 50, 500, 1)], 900_000);
    expect(points).toEqual([
      { start: '2027-01-01T10:00:00.000Z', cpu_millicores: 200, memory_bytes: 2000, rx_bytes: 12, tx_bytes: 2 },
      { start: '2027-01-01T10:15:00.000Z', cpu_millicores: 50, memory_bytes: 500, rx_bytes: 1, tx_bytes: 1 },
    ]);
  });
});
