import { crypto as acmeCrypto } from 'acme-client';
import type { Clock } from '../../domain/clock.js';
import { AcmeChallenges, createRouterDriver, silentLog, type RouterConfig, type RouterDriver, type RouterLog } from '../router/index.js';
import { AcmeIssuer } from './acme-issuer.js';
import { CertificateManager, type CertificateManagerOptions } from './certificate-manager.js';
import { CertificateStore } from './certificate-store.js';
import { withCertificates } from './tls-router.js';

export { AcmeIssuer, type CertificateIssuer } from './acme-issuer.js';
export { CertificateManager, renewalDue } from './certificate-manager.js';
export { CertificateStore, type StoredCertificate } from './certificate-store.js';
export { withCertificates } from './tls-router.js';

export interface AcmeSettings {
  directoryUrl: string;
  email?: string;
  /** PEM bundle to trust for the directory (a private CA) */
  ca?: string;
  /** `<data-dir>/tls` */
  dir: string;
  clock: Clock;
  log?: RouterLog;
  /** a certificate is held for a served host */
  onCertificate?: (host: string) => Promise<void>;
  /** timings of the manager (tests) */
  timing?: Partial<Pick<CertificateManagerOptions, 'renewBeforeMs' | 'checkEveryMs' | 'retryMinMs' | 'retryMaxMs' | 'stopTimeoutMs'>>;
  /** how often acme-client polls the CA (tests) */
  pollMinMs?: number;
  pollMaxMs?: number;
}

/**
 * The router with ACME: the data plane gets a TLS listener and answers HTTP-01 from the
 * challenges the manager sets, and the manager around it obtains and renews the certificates.
 */
export function createAcmeRouter(
  router: Omit<RouterConfig, 'tls' | 'challenges'> & { tls: NonNullable<RouterConfig['tls']> },
  acme: AcmeSettings,
): { router: RouterDriver; manager: CertificateManager } {
  const challenges = new AcmeChallenges();
  const driver = createRouterDriver({ ...router, challenges });
  const store = new CertificateStore(acme.dir, async () => (await acmeCrypto.createPrivateEcdsaKey('P-256')).toString('utf8'));
  const issuer = new AcmeIssuer({
    directoryUrl: acme.directoryUrl,
    accountKey: () => store.accountKey(),
    challenges,
    ...(acme.email === undefined ? {} : { email: acme.email }),
    ...(acme.ca === undefined ? {} : { ca: acme.ca }),
    ...(acme.pollMinMs === undefined ? {} : { pollMinMs: acme.pollMinMs }),
    ...(acme.pollMaxMs === undefined ? {} : { pollMaxMs: acme.pollMaxMs }),
  });
  const manager = new CertificateManager({
    ...acme.timing,
    store,
    issuer,
    publish: (certificates) => driver.setCertificates?.(certificates) ?? Promise.reject(new Error(`The ${driver.name} router does not serve TLS.`)),
    clock: acme.clock,
    log: acme.log ?? silentLog,
    ...(acme.onCertificate === undefined ? {} : { onCertificate: acme.onCertificate }),
  });
  return { router: withCertificates(driver, manager), manager };
}
