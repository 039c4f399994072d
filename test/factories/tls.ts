// Certificates for tests, made with the openssl CLI (node:crypto can parse X.509 but not issue it).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { connect as tlsConnect, TLSSocket } from 'node:tls';
import { promisify } from 'node:util';

const run = promisify(execFile);

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args, { timeout: 20_000 });
  } catch (err) {
    throw new Error(`openssl ${args[0] ?? ''} failed: ${(err as { stderr?: string }).stderr ?? String(err)}`);
  }
}

export interface TestCa {
  certificatePem: string;
  keyFile: string;
  certFile: string;
  dir: string;
}

export interface TestLeaf {
  certificatePem: string;
  privateKeyPem: string;
  certFile: string;
  keyFile: string;
  /** hex, as openssl wrote it */
  serial: string;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** A self-signed CA in `dir` (P-256, valid two days). */
export async function makeCa(dir: string, name = 'Slipway Test CA'): Promise<TestCa> {
  const id = randomBytes(4).toString('hex');
  const keyFile = join(dir, `ca-${id}.key`);
  const certFile = join(dir, `ca-${id}.crt`);
  await openssl([
    'req', '-x509', ...EC, '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', `/CN=${name} ${id}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return { certificatePem: readFileSync(certFile, 'utf8'), keyFile, certFile, dir };
}

/** A leaf certificate signed by `ca` for DNS names (and optionally IP addresses). */
export async function makeLeaf(ca: TestCa, names: string[], ips: string[] = []): Promise<TestLeaf> {
  const id = randomBytes(4).toString('hex');
  const base = join(ca.dir, `${names[0] ?? 'leaf'}-${id}`);
  const ext = `${base}.ext`;
  const san = [...names.map((n) => `DNS:${n}`), ...ips.map((ip) => `IP:${ip}`)].join(',');
  writeFileSync(ext, `subjectAltName=${san}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`);
  const serial = `0x${randomBytes(8).toString('hex')}`;
  await openssl(['req', ...EC, '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${names[0] ?? 'leaf'}`]);
  await openssl(['x509', '-req', '-in', `${base}.csr`, '-CA', ca.certFile, '-CAkey', ca.keyFile, '-set_serial', serial, '-days', '2', '-extfile', ext, '-out', `${base}.crt`]);
  return {
    certificatePem: readFileSync(`${base}.crt`, 'utf8'),
    privateKeyPem: readFileSync(`${base}.key`, 'utf8'),
    certFile: `${base}.crt`,
    keyFile: `${base}.key`,
    serial: serial.slice(2).toUpperCase().replace(/^0+/, ''),
  };
}

export interface HttpsAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** the serial of the certificate the server presented, hex as Node gives it */
  serial: string;
  issuer: string;
  subject: string;
}

/**
 * A request over HTTPS to 127.0.0.1:port with `servername` as SNI ('' sends none) and the Host
 * header `host`, trusting only `ca`.
 */
export function httpsCall(port: number, servername: string, host: string, ca: string, path = '/', timeoutMs = 10_000): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, servername, ca, headers: { host }, agent: false }, (res) => {
      const socket = res.socket;
      if (!(socket instanceof TLSSocket)) {
        reject(new Error('the HTTPS answer did not come over TLS'));
        return;
      }
      const cert = socket.getPeerCertificate();
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { body += d; });
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, serial: cert.serialNumber, issuer: String(cert.issuer.CN), subject: String(cert.subject.CN) });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => { req.destroy(new Error(`no HTTPS answer for ${servername === '' ? host : servername} within ${String(timeoutMs / 1000)} s`)); });
    req.on('error', reject);
    req.end();
  });
}

/** GET / over HTTPS on 127.0.0.1:port with SNI and Host = host, trusting only `ca`. */
export const httpsGet = (port: number, host: string, ca: string): Promise<HttpsAnswer> => httpsCall(port, host, host, ca);

/** Whether a TLS handshake with this SNI (none for '') completes at all, whatever the certificate. */
export function handshakes(port: number, servername: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false });
    socket.setTimeout(10_000, () => { socket.destroy(); resolve(false); });
    socket.once('secureConnect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => { resolve(false); });
    socket.once('close', () => { resolve(false); });
  });
}
