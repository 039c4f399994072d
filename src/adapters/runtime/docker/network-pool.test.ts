import { describe, expect, it } from 'vitest';
import { freeSubnet, poolCapacity, poolProblem, routedSubnets } from './network-pool.js';

describe('the network pool', () => {
  const pool = { cidr: '10.213.0.0/16', size: 24 };

  it('takes the first block no network overlaps, skipping larger and smaller ones, and ignores IPv6 and other ranges', () => {
    expect(freeSubnet(pool, [])).toBe('10.213.0.0/24');
    expect(freeSubnet(pool, ['10.213.0.0/24', '10.213.1.128/25', 'fd00::/64', '172.17.0.0/16'])).toBe('10.213.2.0/24');
    // a /20 inside the pool covers 16 blocks; a /8 around it covers all
    expect(freeSubnet(pool, ['10.213.0.0/20'])).toBe('10.213.16.0/24');
    expect(freeSubnet(pool, ['10.0.0.0/8'])).toBeNull();
    expect(freeSubnet({ cidr: '10.213.0.0/26', size: 28 }, ['10.213.0.0/28', '10.213.0.32/28'])).toBe('10.213.0.16/28');
    const full = Array.from({ length: 256 }, (_, i) => `10.213.${i.toString()}.0/24`);
    expect(freeSubnet(pool, full)).toBeNull();
    expect(freeSubnet(pool, full.slice(1))).toBe('10.213.0.0/24');
  });

  it("keeps clear of the subnets the host routes to its own interfaces, but for the bridges it is told to skip", () => {
    const route = [
      'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT',
      'eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0',
      'eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0',
      // a bridge the engine lost track of (its link down), on the pool's first block
      'br-0123456789ab\t0000D50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0',
      'slw-0ad5010018\t0001D50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0',
      'garbage',
    ].join('\n');
    const all = routedSubnets(route);
    expect(all).toEqual(['192.0.2.0/24', '10.213.0.0/24', '10.213.1.0/24']);
    expect(freeSubnet(pool, all)).toBe('10.213.2.0/24');
    expect(freeSubnet(pool, routedSubnets(route, (name) => name.startsWith('slw-')))).toBe('10.213.1.0/24');
    expect(routedSubnets('')).toEqual([]);
  });

  it('counts its networks and checks its settings', () => {
    expect(poolCapacity(pool)).toBe(256);
    expect(poolCapacity({ cidr: '10.200.0.0/14', size: 26 })).toBe(4096);
    expect(poolProblem(pool)).toBeNull();
    expect(poolProblem({ cidr: '10.213.0.0/16', size: 29 })).toMatch(/to \/28/);
    expect(poolProblem({ cidr: '300.0.0.0/8', size: 24 })).toMatch(/IPv4 CIDR/);
  });
});
