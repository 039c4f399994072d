import { endianness } from 'node:os';

/**
 * The address pool of workspace networks (`--network-pool`, `--network-size`). Docker's own
 * default pools hold about 30 bridge networks (172.17-31.0.0/16 and 192.168.0.0/16 in /20s);
 * Slipway gives each workspace network an explicit subnet from a pool of its own instead. What is
 * free is read from the engine each time (every network's subnets, Slipway's or not), so a
 * removed network's subnet is free again at once.
 */

export interface NetworkPool {
  /** e.g. "10.213.0.0/16" */
  cidr: string;
  /** prefix length of each network, e.g. 24 */
  size: number;
}

export const DEFAULT_NETWORK_POOL: NetworkPool = { cidr: '10.213.0.0/16', size: 24 };

/**
 * The IPv4 subnets this host routes to its own interfaces (a LAN, a VPN, a bridge the engine lost
 * track of, even one whose link is down), read from Linux's `/proc/net/route` text, which a new
 * network must not overlap either: two interfaces on one subnet send its replies to one of them
 * only. The default route is left out, and so is every interface `skip` names (Slipway's own
 * bridges, named by their subnet, are taken over by the network of that subnet).
 */
export function routedSubnets(procNetRoute: string, skip: (iface: string) => boolean = () => false, littleEndian = endianness() === 'LE'): string[] {
  const out: string[] = [];
  for (const line of procNetRoute.split('\n').slice(1, 10_001)) {
    const f = line.trim().split(/\s+/);
    const [iface, dest, , , , , , mask] = f;
    if (iface === undefined || dest === undefined || mask === undefined || !/^[0-9A-Fa-f]{8}$/.test(dest) || !/^[0-9A-Fa-f]{8}$/.test(mask) || skip(iface)) continue;
    // the kernel writes them in the host's byte order
    const ip = littleEndian ? Buffer.from(dest, 'hex').reverse() : Buffer.from(dest, 'hex');
    const bits = Buffer.from(mask, 'hex').reduce((n, byte) => n + byte.toString(2).replace(/0/g, '').length, 0);
    if (bits === 0) continue;
    out.push(`${[...ip].join('.')}/${String(bits)}`);
  }
  return out;
}

/** An IPv4 block: its first address as a 32-bit number, and its prefix length. */
interface Block {
  start: number;
  prefix: number;
}

function parseIPv4(text: string): number | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    n = n * 256 + Number(p);
  }
  return n;
}

const formatIPv4 = (n: number): string => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');

const blockSize = (prefix: number): number => 2 ** (32 - prefix);

/** "10.0.0.0/8" → its block; null for anything else (IPv6 included). */
export function parseCidr(text: string): Block | null {
  const m = /^([0-9.]+)\/(\d{1,2})$/.exec(text.trim());
  if (m === null) return null;
  const start = parseIPv4(m[1] ?? '');
  const prefix = Number(m[2]);
  if (start === null || prefix > 32) return null;
  return { start: start - (start % blockSize(prefix)), prefix };
}

const overlaps = (a: Block, b: Block): boolean => a.start < b.start + blockSize(b.prefix) && b.start < a.start + blockSize(a.prefix);

/**
 * Why the pool cannot be used, as a sentence about the settings, or null. Its network size must
 * leave room for containers (at most /28: 14 addresses) and fit in the pool.
 */
export function poolProblem(pool: NetworkPool): string | null {
  const m = /^([0-9.]+)\/(\d{1,2})$/.exec(pool.cidr.trim());
  const block = parseCidr(pool.cidr);
  if (m === null || block === null) return `must be an IPv4 CIDR block like ${DEFAULT_NETWORK_POOL.cidr} (got "${pool.cidr}")`;
  if (parseIPv4(m[1] ?? '') !== block.start) return `must start at its block's first address (${formatIPv4(block.start)}/${block.prefix.toString()}, not "${pool.cidr}")`;
  if (!Number.isInteger(pool.size) || pool.size < block.prefix || pool.size > 28) {
    return `needs a network size from /${block.prefix.toString()} (the pool's own) to /28 (got /${String(pool.size)})`;
  }
  return null;
}

/** How many networks the pool holds. */
export const poolCapacity = (pool: NetworkPool): number => {
  const block = parseCidr(pool.cidr);
  return block === null || pool.size < block.prefix ? 0 : 2 ** (pool.size - block.prefix);
};

/**
 * The first subnet of the pool that overlaps none of `used` (CIDR strings; IPv6 and unreadable
 * ones are ignored), or null when the pool is full.
 */
export function freeSubnet(pool: NetworkPool, used: Iterable<string>): string | null {
  const block = parseCidr(pool.cidr);
  if (block === null) return null;
  const taken = [...used].map(parseCidr).filter((b): b is Block => b !== null && overlaps(b, block));
  const step = blockSize(pool.size);
  for (let start = block.start; start < block.start + blockSize(block.prefix); start += step) {
    const candidate = { start, prefix: pool.size };
    const clash = taken.find((t) => overlaps(t, candidate));
    if (clash === undefined) return `${formatIPv4(start)}/${pool.size.toString()}`;
    // skip past a larger block in one go
    if (clash.prefix < pool.size) start = clash.start + blockSize(clash.prefix) - step;
  }
  return null;
}
