import { Agent } from 'node:https';
import { axios as acmeAxios, Client, crypto as acmeCrypto } from 'acme-client';
import type { AcmeChallenges, TlsCertificate } from '../router/index.js';

/** Where certificates come from: an ACME CA here; the certificate manager only needs this. */
export interface CertificateIssuer {
  issue(host: string): Promise<TlsCertificate>;
}

export interface AcmeIssuerOptions {
  /** the CA's ACME directory, e.g. https://acme-v02.api.letsencrypt.org/directory */
  directoryUrl: string;
  /** the account key (PEM), read when the first certificate is ordered */
  accountKey: () => Promise<string>;
  /** the account's contact, `mailto:` (the CA's expiry and policy mail) */
  email?: string;
  /** PEM bundle trusted for the directory's TLS, besides the system's (a private CA, pebble) */
  ca?: string;
  /** where the HTTP-01 answers go; the router serves them */
  challenges: AcmeChallenges;
  /** how often acme-client polls a challenge or an order: from `pollMinMs` up to `pollMaxMs` */
  pollMinMs?: number;
  pollMaxMs?: number;
}

/** The longest common name a certificate may carry (RFC 5280 ub-common-name); longer names go in the SAN only. */
const MAX_COMMON_NAME = 64;

/**
 * Orders a certificate for one host with acme-client's `auto()` flow and the HTTP-01 challenge,
 * which the router answers on its plain listener. Each certificate gets a new P-256 key.
 */
export class AcmeIssuer implements CertificateIssuer {
  private client: Promise<Client> | undefined;

  private readonly directoryUrl: string;
  private readonly accountKey: () => Promise<string>;
  private readonly email: string | undefined;
  private readonly ca: string | undefined;
  private readonly challenges: AcmeChallenges;
  private readonly pollMinMs: number | undefined;
  private readonly pollMaxMs: number | undefined;

  constructor(o: AcmeIssuerOptions) {
    this.directoryUrl = o.directoryUrl;
    this.accountKey = o.accountKey;
    this.email = o.email;
    this.ca = o.ca;
    this.challenges = o.challenges;
    this.pollMinMs = o.pollMinMs;
    this.pollMaxMs = o.pollMaxMs;
  }

  async issue(host: string): Promise<TlsCertificate> {
    const client = await this.acmeClient();
    const privateKey = await acmeCrypto.createPrivateEcdsaKey('P-256');
    const [, csr] = await acmeCrypto.createCsr(host.length <= MAX_COMMON_NAME ? { commonName: host, altNames: [host] } : { altNames: [host] }, privateKey);
    const { challenges, email } = this;
    const certificatePem = await client.auto({
      csr,
      ...(email === undefined ? {} : { email }),
      // Setting an ACME directory is the operator's agreement to that CA's terms (docs/router.md).
      termsOfServiceAgreed: true,
      challengePriority: ['http-01'],
      // acme-client would first fetch the token itself through public DNS and port 80; the CA
      // checks anyway, and a router behind NAT often cannot reach itself that way.
      skipChallengeVerification: true,
      challengeCreateFn: async (_authz, challenge, keyAuthorization) => {
        if (challenge.type !== 'http-01') throw new Error(`Slipway answers only http-01 challenges, not ${challenge.type}.`);
        challenges.set(challenge.token, keyAuthorization);
      },
      challengeRemoveFn: async (_authz, challenge) => {
        challenges.delete(challenge.token);
      },
    });
    return { host, certificatePem, privateKeyPem: privateKey.toString('utf8') };
  }

  private acmeClient(): Promise<Client> {
    const { directoryUrl, ca, pollMinMs, pollMaxMs } = this;
    this.client ??= this.accountKey()
      .then((accountKey) => {
        if (ca !== undefined) trustFor(directoryUrl, ca);
        return new Client({
          directoryUrl,
          accountKey,
          ...(pollMinMs === undefined ? {} : { backoffMin: pollMinMs }),
          ...(pollMaxMs === undefined ? {} : { backoffMax: pollMaxMs }),
        });
      })
      .catch((err: unknown) => {
        this.client = undefined;
        throw err;
      });
    return this.client;
  }
}

/** origin → the agent that trusts its CA; filled by trustFor() */
const agents = new Map<string, Agent>();
let intercepting = false;

/**
 * acme-client makes every request through one axios instance of its own and takes no agent per
 * client, so the extra CA is attached there (module state, forced by that design), and only to
 * the requests for the directory's origin.
 */
function trustFor(directoryUrl: string, ca: string): void {
  agents.set(new URL(directoryUrl).origin, new Agent({ ca, keepAlive: true }));
  if (intercepting) return;
  intercepting = true;
  acmeAxios.interceptors.request.use((config) => {
    if (config.url === undefined) return config;
    const agent = agents.get(new URL(config.url, config.baseURL).origin);
    if (agent !== undefined) config.httpsAgent = agent;
    return config;
  });
}
