import { X509Certificate } from 'node:crypto';
import { chmod, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { checkCertificate, type TlsCertificate } from '../router/index.js';

/**
 * What Slipway keeps under `<data-dir>/tls` (0700):
 *
 *   account.key          the ACME account's private key (0600)
 *   certs/<host>.crt     a host's certificate, leaf first, then the chain
 *   certs/<host>.key     its private key (0600)
 *
 * Files are written under a temporary name and renamed, the key before the certificate: a crash
 * in between leaves a pair that does not match, which load() refuses, so the host is ordered
 * again. Host names are RFC 1123 names (checked), so they are safe file names.
 */
export interface StoredCertificate extends TlsCertificate {
  readonly notBefore: Date;
  readonly notAfter: Date;
}

export class CertificateStore {
  readonly dir: string;
  private readonly certs: string;
  private account: Promise<string> | undefined;

  constructor(
    dir: string,
    /** makes a new account key (PEM) when there is none */
    private readonly newAccountKey: () => Promise<string>,
  ) {
    this.dir = dir;
    this.certs = join(dir, 'certs');
  }

  /** Creates the directories (0700) and the account key if it is missing. */
  async prepare(): Promise<void> {
    for (const d of [this.dir, this.certs]) {
      await mkdir(d, { recursive: true, mode: 0o700 });
      await chmod(d, 0o700);
    }
    await this.accountKey();
  }

  /** The ACME account key, created once (0600) and kept: it is the account's identity. */
  accountKey(): Promise<string> {
    this.account ??= this.loadOrCreateAccountKey().catch((err: unknown) => {
      this.account = undefined;
      throw err;
    });
    return this.account;
  }

  /** Every stored certificate that is usable; the others are reported (and will be ordered again). */
  async loadAll(): Promise<{ certificates: StoredCertificate[]; problems: { host: string; reason: string }[] }> {
    let names: string[];
    try {
      names = await readdir(this.certs);
    } catch {
      return { certificates: [], problems: [] };
    }
    const certificates: StoredCertificate[] = [];
    const problems: { host: string; reason: string }[] = [];
    for (const name of names.filter((n) => n.endsWith('.crt')).sort()) {
      const host = name.slice(0, -'.crt'.length);
      try {
        certificates.push(await this.load(host));
      } catch (err) {
        problems.push({ host, reason: err instanceof Error ? err.message : String(err) });
      }
    }
    return { certificates, problems };
  }

  async load(host: string): Promise<StoredCertificate> {
    const [certificatePem, privateKeyPem] = await Promise.all([readFile(this.certFile(host), 'utf8'), readFile(this.keyFile(host), 'utf8')]);
    return stored({ host, certificatePem, privateKeyPem });
  }

  /** Checks the pair (it must parse, match and name the host), then writes it. */
  async save(certificate: TlsCertificate): Promise<StoredCertificate> {
    const s = stored(certificate);
    await writeAtomically(this.keyFile(s.host), s.privateKeyPem, 0o600);
    await writeAtomically(this.certFile(s.host), s.certificatePem, 0o644);
    return s;
  }

  certFile(host: string): string {
    return join(this.certs, `${host}.crt`);
  }

  keyFile(host: string): string {
    return join(this.certs, `${host}.key`);
  }

  private async loadOrCreateAccountKey(): Promise<string> {
    const file = join(this.dir, 'account.key');
    try {
      return await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`The ACME account key ${file} cannot be read: ${(err as Error).message}`);
    }
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const pem = await this.newAccountKey();
    await writeAtomically(file, pem, 0o600);
    return pem;
  }
}

/** A checked pair with its validity period. */
function stored(c: TlsCertificate): StoredCertificate {
  const checked = checkCertificate(c);
  const leaf = new X509Certificate(checked.certificatePem);
  return {
    host: checked.host,
    certificatePem: checked.certificatePem,
    privateKeyPem: checked.privateKeyPem,
    notBefore: new Date(leaf.validFrom),
    notAfter: new Date(leaf.validTo),
  };
}

async function writeAtomically(file: string, text: string, mode: number): Promise<void> {
  const temp = `${file}.tmp`;
  await rm(temp, { force: true });
  await writeFile(temp, text, { mode });
  await chmod(temp, mode);
  await rename(temp, file);
}
