/**
 * Where an outgoing webhook may go. A monitor's `chat_webhook_url` is chosen by a workspace
 * member, so without these checks it would let anyone make the control plane POST to its own
 * network: the loopback admin ports, the cloud metadata service, other tenants' containers.
 * The URL's shape is checked when it is saved, and its host again at send time, after DNS
 * resolution; the request then connects to exactly the address that was checked.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

export interface TargetPolicy {
  /** the operator's setting: private, loopback and link-local targets allowed (a self-hosted chat) */
  allowPrivate: boolean;
  /** every address of a host name; default: the system resolver (`dns.lookup`, all addresses) */
  lookup?: (host: string) => Promise<string[]>;
}

/** What a refusal tells the user to do about it. */
const ALLOW_HINT = 'the operator can allow such targets with --notify-allow-private';

type Family = 'ipv4' | 'ipv6';

/** One kind of address that no webhook may reach, and how to say so. */
interface Rule {
  reason: string;
  list: BlockList;
}

function rule(reason: string, subnets: [string, number, Family][]): Rule {
  const list = new BlockList();
  for (const [network, prefix, family] of subnets) list.addSubnet(network, prefix, family);
  return { reason, list };
}

// In order: the first rule that matches names the reason (the broadcast address is inside 240/4).
const RULES: Rule[] = [
  rule('an unspecified address', [['0.0.0.0', 8, 'ipv4'], ['::', 128, 'ipv6']]),
  rule('a loopback address', [['127.0.0.0', 8, 'ipv4'], ['::1', 128, 'ipv6']]),
  rule('a link-local address', [['169.254.0.0', 16, 'ipv4'], ['fe80::', 10, 'ipv6']]),
  rule('a private address', [
    ['10.0.0.0', 8, 'ipv4'],
    ['172.16.0.0', 12, 'ipv4'],
    ['192.168.0.0', 16, 'ipv4'],
    ['fc00::', 7, 'ipv6'],
    // deprecated site-local, and NAT64 prefixes of the local network (RFC 8215)
    ['fec0::', 10, 'ipv6'],
    ['64:ff9b:1::', 48, 'ipv6'],
  ]),
  rule('a shared (carrier-grade NAT) address', [['100.64.0.0', 10, 'ipv4']]),
  rule('the broadcast address', [['255.255.255.255', 32, 'ipv4']]),
  rule('a multicast address', [['224.0.0.0', 4, 'ipv4'], ['ff00::', 8, 'ipv6']]),
  rule('a reserved address', [
    ['240.0.0.0', 4, 'ipv4'],
    ['192.0.0.0', 24, 'ipv4'],
    ['192.0.2.0', 24, 'ipv4'],
    ['198.51.100.0', 24, 'ipv4'],
    ['203.0.113.0', 24, 'ipv4'],
    ['198.18.0.0', 15, 'ipv4'],
    ['192.88.99.0', 24, 'ipv4'],
    // IPv4-compatible (deprecated), discard-only, Teredo, ORCHID, documentation
    ['::', 96, 'ipv6'],
    ['100::', 64, 'ipv6'],
    ['2001::', 32, 'ipv6'],
    ['2001:10::', 28, 'ipv6'],
    ['2001:db8::', 32, 'ipv6'],
    ['3fff::', 20, 'ipv6'],
  ]),
];

const METADATA = '169.254.169.254';

/**
 * Why no webhook may go to `ip` (a phrase like "a private address"), or null for a public
 * address. An IPv6 address that carries an IPv4 one (IPv4-mapped, NAT64, 6to4) is judged by the
 * IPv4 address it reaches. Anything that is not an IP address is refused too.
 */
export function blockedAddress(ip: string): string | null {
  const bare = ip.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) {
    if (bare === METADATA) return 'the link-local address of cloud metadata services';
    return RULES.find((r) => r.list.check(bare, 'ipv4'))?.reason ?? null;
  }
  if (family !== 6) return 'not an IP address';
  const words = ipv6Words(bare);
  const carried = embeddedIpv4(words);
  if (carried !== null) {
    const reason = blockedAddress(carried.ipv4);
    return reason === null ? null : `${reason} (${carried.ipv4}) inside ${carried.how}`;
  }
  return RULES.find((r) => r.list.check(bare, 'ipv6'))?.reason ?? null;
}

/** The eight 16-bit words of a valid IPv6 address (isIP said 6), a dotted IPv4 tail included. */
function ipv6Words(ip: string): number[] {
  let text = ip;
  const tail: number[] = [];
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    tail.push((a << 8) | b, (c << 8) | d);
    text = text.slice(0, dotted.index);
    if (text.endsWith(':') && !text.endsWith('::')) text = text.slice(0, -1);
  }
  const [head = '', rest] = text.split('::');
  const hex = (part: string) => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  const before = hex(head);
  const after = [...hex(rest ?? ''), ...tail];
  const gap = rest === undefined ? 0 : 8 - before.length - after.length;
  return [...before, ...Array<number>(gap).fill(0), ...after];
}

/** The IPv4 address an IPv6 address stands for, where the connection really goes. */
function embeddedIpv4(w: number[]): { ipv4: string; how: string } | null {
  const [w0 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0, w5 = 0, w6 = 0, w7 = 0] = w;
  const v4 = (hi: number, lo: number) => [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');
  const zeros = (...ws: number[]) => ws.every((x) => x === 0);
  if (zeros(w0, w1, w2, w3, w4) && w5 === 0xffff) return { ipv4: v4(w6, w7), how: 'an IPv4-mapped IPv6 address' };
  // IPv4-translated (RFC 2765 SIIT)
  if (zeros(w0, w1, w2, w3, w5) && w4 === 0xffff) return { ipv4: v4(w6, w7), how: 'an IPv4-translated IPv6 address' };
  if (w0 === 0x64 && w1 === 0xff9b && zeros(w2, w3, w4, w5)) return { ipv4: v4(w6, w7), how: 'a NAT64 address' };
  if (w0 === 0x2002) return { ipv4: v4(w1, w2), how: 'a 6to4 address' };
  return null;
}

const LOCALHOST = /^(localhost|.+\.localhost)\.?$/i;

/**
 * Checks a webhook URL without the network: the answer when it is saved, and the first step at
 * send time. One sentence naming `chat_webhook_url`, or null when the URL may be used. The
 * sentence never repeats the URL's path: that is where webhooks keep their secret.
 */
export function checkUrlShape(url: string, policy: Pick<TargetPolicy, 'allowPrivate'> = { allowPrivate: false }): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return '"chat_webhook_url" must be an http or https URL.';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    return `"chat_webhook_url" must be an http or https URL (this one is ${u.protocol.replace(/:$/, '')}).`;
  }
  if (u.hostname === '') return '"chat_webhook_url" must name a host, like https://hooks.slack.com/services/….';
  if (u.username !== '' || u.password !== '') {
    // Chat webhooks carry their secret in the path; a password here would be sent in clear on http
    // and shown to every member who reads the monitor.
    return '"chat_webhook_url" must not contain a user name or password before the host; webhook URLs carry their secret in the path.';
  }
  if (policy.allowPrivate) return null;
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host) !== 0) {
    const reason = blockedAddress(host);
    if (reason !== null) return `"chat_webhook_url" points at ${reason} (${host}); webhooks may go only to public addresses (${ALLOW_HINT}).`;
  } else if (LOCALHOST.test(host)) {
    return `"chat_webhook_url" points at this machine (${host}); webhooks may go only to public addresses (${ALLOW_HINT}).`;
  }
  return null;
}

async function systemLookup(host: string): Promise<string[]> {
  const found = await dnsLookup(host, { all: true, verbatim: true });
  return found.map((a) => a.address);
}

/** The host name of a webhook URL did not resolve: worth another try later, unlike a refusal. */
export class ResolveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResolveError';
  }
}

/**
 * At send time: the address to connect to, or why the webhook must not be sent. The host's
 * addresses are resolved once, and the request must connect to the address returned (not
 * resolve the name again), so a DNS answer that changes between check and connect (rebinding)
 * cannot redirect it. Refused when ANY of the addresses is blocked: a name that points both
 * outside and inside is not a chat server. Rejects with a ResolveError when the name does not
 * resolve.
 */
export async function resolveTarget(url: string, policy: TargetPolicy): Promise<{ address: string; family: 4 | 6 } | { refused: string }> {
  const shape = checkUrlShape(url, policy);
  if (shape !== null) return { refused: shape };
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: string[];
  if (isIP(host) !== 0) {
    addresses = [host];
  } else {
    try {
      addresses = await (policy.lookup ?? systemLookup)(host);
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      throw new ResolveError(
        code === 'ENOTFOUND' || code === 'ENODATA' ? "the webhook's host name does not resolve" : `the webhook's host name could not be resolved (${typeof code === 'string' ? code : 'DNS error'})`,
      );
    }
  }
  if (addresses.length === 0) throw new ResolveError("the webhook's host name does not resolve");
  for (const address of addresses) {
    const reason = isIP(address.replace(/%.*$/, '')) === 0 ? 'not an IP address' : policy.allowPrivate ? null : blockedAddress(address);
    if (reason !== null) return { refused: `the webhook's host resolves to ${reason} (${address}); ${ALLOW_HINT}` };
  }
  const [first = ''] = addresses;
  return { address: first, family: isIP(first.replace(/%.*$/, '')) === 6 ? 6 : 4 };
}
