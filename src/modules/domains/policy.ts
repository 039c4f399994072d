/** How custom domains are trusted (docs/router.md "Custom domains"). */
export interface DomainPolicy {
  /** dns: routed once ownership is proven (TXT record, or the name resolving to a public address); off: trusted and verified at once */
  verification: 'dns' | 'off';
  /** resolvers asked, `ip` or `ip:port`; empty: the system's */
  dnsServers: readonly string[];
  /** this installation's public addresses: a name whose A/AAAA records include one is proven; empty: TXT records only */
  publicAddresses: readonly string[];
  maxPerProject: number;
}

export const DEFAULT_DOMAIN_POLICY: DomainPolicy = { verification: 'dns', dnsServers: [], publicAddresses: [], maxPerProject: 20 };
