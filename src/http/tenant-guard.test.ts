import { describe, expect, it } from 'vitest';
import { DOCKER_DEFAULT_BRIDGES, TenantNetworks } from './tenant-guard.js';

describe('TenantNetworks', () => {
  const pool = new TenantNetworks(['10.213.0.0/16']);

  it('knows the addresses of the workspace networks, also as IPv4-mapped IPv6', () => {
    for (const ip of ['10.213.0.2', '10.213.255.254', '::ffff:10.213.7.9', '::FFFF:10.213.0.1']) expect(pool.includes(ip), ip).toBe(true);
  });

  it('lets everything else through: loopback, the host\'s LAN, other private blocks, IPv6', () => {
    for (const ip of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '10.212.255.255', '10.214.0.0', '192.168.1.20', '172.17.0.2', '2001:db8::1', '', 'not-an-ip', undefined]) {
      expect(pool.includes(ip), String(ip)).toBe(false);
    }
  });

  it('without a pool, refuses Docker\'s default bridge pools but not 192.168.0.0/16', () => {
    const docker = new TenantNetworks(DOCKER_DEFAULT_BRIDGES);
    expect(docker.includes('172.17.0.3')).toBe(true);
    expect(docker.includes('172.31.255.1')).toBe(true);
    expect(docker.includes('172.16.0.1')).toBe(false);
    expect(docker.includes('172.32.0.1')).toBe(false);
    expect(docker.includes('192.168.0.10')).toBe(false);
  });

  it('refuses nothing when it has no blocks (--api-refuse-networks none)', () => {
    expect(new TenantNetworks([]).includes('10.213.0.2')).toBe(false);
  });
});
