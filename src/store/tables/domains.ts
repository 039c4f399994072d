export interface DomainsTable {
  id: string;
  project_id: string;
  domain: string;
  /** 1: ownership proven (DNS TXT record, the name resolving here, or --domain-verification off); only these are routed */
  verified: number;
  /** the TXT record `_slipway-challenge.<domain>` proves ownership with `slipway-verify=<token>` */
  verification_token: string;
  verified_at: string | null;
  created_at: string;
}

export interface DomainsTables {
  domains: DomainsTable;
}
