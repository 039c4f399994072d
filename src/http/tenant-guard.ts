import { BlockList, isIPv4 } from 'node:net';
import type { Server } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';

/**
 * Docker's own default address pools for bridge networks (172.17.0.0/16 … 172.31.0.0/16): where
 * workspace networks are made when `--network-pool` is empty. 192.168.0.0/16, also in Docker's
 * defaults, is left out: it is the address space of most home and office networks.
 */
export const DOCKER_DEFAULT_BRIDGES: readonly string[] = Array.from({ length: 15 }, (_, i) => `172.${(17 + i).toString()}.0.0/16`);

/**
 * The address blocks tenant containers connect from, whose connections the control plane's
 * listeners refuse (docs/security.md#metrics-and-the-control-planes-ports).
 */
export class TenantNetworks {
  private readonly blocks = new BlockList();

  constructor(readonly cidrs: readonly string[]) {
    for (const cidr of cidrs) {
      const [net = '', prefix = ''] = cidr.split('/');
      this.blocks.addSubnet(net, Number(prefix), isIPv4(net) ? 'ipv4' : 'ipv6');
    }
  }

  /** Whether a peer address (as a socket reports it, IPv4-mapped IPv6 included) is in a tenant block. */
  includes(address: string | undefined): boolean {
    if (address === undefined || this.cidrs.length === 0) return false;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    const ip = mapped?.[1] ?? address;
    return isIPv4(ip) ? this.blocks.check(ip, 'ipv4') : this.blocks.check(ip, 'ipv6');
  }
}

/** A tenant container never talks to the control plane: its connections are closed before a byte is read. */
export function refuseTenants(server: Server, tenants: TenantNetworks, log: Pick<FastifyBaseLogger, 'warn'>, what: string): void {
  if (tenants.cidrs.length === 0) return;
  const told = new Set<string>();
  server.on('connection', (socket) => {
    const peer = socket.remoteAddress;
    if (!tenants.includes(peer)) return;
    // one line per address (and at most 1,000 addresses): a loop of attempts does not flood the log
    if (peer !== undefined && !told.has(peer) && told.size < 1000) {
      told.add(peer);
      log.warn({ address: peer }, `${what}: a connection from a tenant network was refused (this is logged once per address)`);
    }
    socket.destroy();
  });
}
