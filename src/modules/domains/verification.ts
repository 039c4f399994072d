import { Resolver } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import type { DomainPolicy } from './policy.js';

/** The TXT record that proves control of `domain` for one claim. */
export const challengeName = (domain: string): string => `_slipway-challenge.${domain}`;
export const challengeValue = (token: string): string => `slipway-verify=${token}`;

/**
 * Asks DNS whether whoever controls `domain` agrees to this claim: the TXT record
 * `_slipway-challenge.<domain>` holds `slipway-verify=<token>`, or (with public addresses
 * configured) the name's A/AAAA records point at this installation. Any DNS failure (no such
 * name, timeout, refused) is "not proven": the claim stays pending and is asked again later.
 */
export class OwnershipProof {
  private readonly resolver: Resolver;
  private readonly addresses: BlockList | null;

  constructor(policy: Pick<DomainPolicy, 'dnsServers' | 'publicAddresses'>) {
    this.resolver = new Resolver({ timeout: 2000, tries: 2 });
    if (policy.dnsServers.length > 0) this.resolver.setServers([...policy.dnsServers]);
    if (policy.publicAddresses.length === 0) {
      this.addresses = null;
    } else {
      this.addresses = new BlockList();
      for (const a of policy.publicAddresses) this.addresses.addAddress(a, isIP(a) === 6 ? 'ipv6' : 'ipv4');
    }
  }

  /**
   * `txt`: the record names this claim's token (proves this claim). `here`: the name resolves to
   * this installation (proves the name is meant for it, not for which tenant: the caller
   * accepts it only for a name nobody else claims).
   */
  async check(domain: string, token: string): Promise<{ txt: boolean; here: boolean }> {
    const [txt, here] = await Promise.all([this.txt(domain, token), this.resolvesHere(domain)]);
    return { txt, here };
  }

  private async txt(domain: string, token: string): Promise<boolean> {
    try {
      const records = await this.resolver.resolveTxt(challengeName(domain));
      return records.some((chunks) => chunks.join('').trim() === challengeValue(token));
    } catch {
      return false;
    }
  }

  private async resolvesHere(domain: string): Promise<boolean> {
    const addresses = this.addresses;
    if (addresses === null) return false;
    const [v4, v6] = await Promise.all([this.resolver.resolve4(domain).catch(() => []), this.resolver.resolve6(domain).catch(() => [])]);
    return v4.some((a) => addresses.check(a, 'ipv4')) || v6.some((a) => addresses.check(a, 'ipv6'));
  }
}
