import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { isRoutableHost, normaliseHost } from './route-table.js';
import type { TlsCertificate } from './router.js';

/** A certificate the router has checked: parsed once, so that no driver serves a broken pair. */
export interface CheckedCertificate extends TlsCertificate {
  /** sha256 of the certificate and the key: names nginx's copies, so a new pair means a reload */
  readonly digest: string;
}

/**
 * Refuses what the data plane would refuse later (where nginx would reject the whole config and
 * with it every route change): a certificate that does not parse, a key that is not its key, a
 * certificate that does not name the host. Messages never quote the PEM.
 */
export function checkCertificate(c: TlsCertificate): CheckedCertificate {
  const host = normaliseHost(c.host) ?? '';
  if (!isRoutableHost(host)) throw new Error(`A certificate was given for "${c.host}", which is not a host name the router serves.`);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(c.certificatePem);
  } catch (err) {
    throw new Error(`The certificate for ${host} is not a PEM certificate (${errorMessage(err)}).`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(c.privateKeyPem);
  } catch (err) {
    throw new Error(`The private key for ${host} is not a PEM private key (${errorMessage(err)}).`);
  }
  if (!leaf.checkPrivateKey(privateKey)) throw new Error(`The private key for ${host} does not belong to its certificate.`);
  if (leaf.checkHost(host) === undefined) throw new Error(`The certificate given for ${host} does not name it (subject ${leaf.subject.replace(/\n/g, ', ')}).`);
  const digest = createHash('sha256').update(c.certificatePem).update('\0').update(c.privateKeyPem).digest('hex').slice(0, 16);
  return { host, certificatePem: c.certificatePem, privateKeyPem: c.privateKeyPem, digest };
}

/** Every certificate checked, one per host (the last one given wins). */
export function checkCertificates(list: readonly TlsCertificate[]): ReadonlyMap<string, CheckedCertificate> {
  const out = new Map<string, CheckedCertificate>();
  for (const c of list) {
    const checked = checkCertificate(c);
    out.set(checked.host, checked);
  }
  return out;
}

const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));
