// A local stand-in for the one GitHub endpoint Slipway calls: POST
// /app/installations/{id}/access_tokens, authenticated by the app's RS256 JWT (verified here with
// the app's public key, as GitHub does). Tokens it issues can be checked by the Git server.
import { generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import { createServer } from 'node:http';
import type { Clock } from '../../src/domain/clock.js';
import { systemClock } from '../../src/domain/clock.js';
import { closeServer, listen } from './git-server.js';

export interface AccessTokenCall {
  installationId: string;
  status: number;
  headers: { accept: string | undefined; apiVersion: string | undefined; userAgent: string | undefined };
  /** the decoded JWT claims, when the token could be decoded */
  claims: Record<string, unknown> | undefined;
  /** why the JWT was refused */
  rejected?: string;
}

export interface FakeGitHub {
  /** the API base URL, `http://127.0.0.1:<port>` */
  url: string;
  appId: number;
  /** PEM, PKCS#1 like the file GitHub hands out */
  privateKeyPem: string;
  publicKey: KeyObject;
  /** every access_tokens request, in order */
  calls: AccessTokenCall[];
  /** every token issued, with its installation */
  issued: Map<string, { installationId: number; expiresAt: Date }>;
  /** true when `token` was issued for `installationId` and has not expired (by the fake's clock) */
  isValid(token: string, installationId?: number): boolean;
  close(): Promise<void>;
}

export interface FakeGitHubOptions {
  appId?: number;
  /** installations that exist; others answer 404 */
  installations?: number[];
  /** how long issued tokens live; GitHub: one hour */
  tokenLifetimeMs?: number;
  clock?: Clock;
}

const MAX_JWT_LIFETIME_S = 10 * 60;

export async function startFakeGitHub(opts: FakeGitHubOptions = {}): Promise<FakeGitHub> {
  const appId = opts.appId ?? 424242;
  const installations = new Set(opts.installations ?? [1001]);
  const lifetime = opts.tokenLifetimeMs ?? 60 * 60_000;
  const clock = opts.clock ?? systemClock;
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privateKeyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const calls: AccessTokenCall[] = [];
  const issued = new Map<string, { installationId: number; expiresAt: Date }>();

  const server = createServer((req, res) => {
    req.resume();
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
    };
    const m = /^\/app\/installations\/([^/]+)\/access_tokens$/.exec(new URL(req.url ?? '/', 'http://x').pathname);
    if (req.method !== 'POST' || m?.[1] === undefined) {
      send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      return;
    }
    const header = (name: string) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    };
    const call: AccessTokenCall = {
      installationId: m[1],
      status: 0,
      headers: { accept: header('accept'), apiVersion: header('x-github-api-version'), userAgent: header('user-agent') },
      claims: undefined,
    };
    calls.push(call);
    const jwt = /^Bearer (.+)$/.exec(header('authorization') ?? '')?.[1];
    const checked = checkJwt(jwt, publicKey, appId, Math.floor(clock.now().getTime() / 1000));
    call.claims = checked.claims;
    if (checked.error !== undefined) {
      call.rejected = checked.error;
      call.status = 401;
      send(401, { message: 'A JSON web token could not be decoded', documentation_url: 'https://docs.github.com/rest' });
      return;
    }
    const id = Number(m[1]);
    if (!installations.has(id)) {
      call.status = 404;
      send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app' });
      return;
    }
    const token = `ghs_${randomBytes(18).toString('hex')}`;
    // GitHub states expiry to the second
    const expiresAt = new Date(Math.floor((clock.now().getTime() + lifetime) / 1000) * 1000);
    issued.set(token, { installationId: id, expiresAt });
    call.status = 201;
    send(201, { token, expires_at: expiresAt.toISOString().replace(/\.\d{3}Z$/, 'Z'), permissions: { contents: 'read', metadata: 'read' }, repository_selection: 'all' });
  });

  return {
    url: await listen(server),
    appId,
    privateKeyPem,
    publicKey,
    calls,
    issued,
    isValid: (token, installationId) => {
      const t = issued.get(token);
      return t !== undefined && t.expiresAt.getTime() > clock.now().getTime() && (installationId === undefined || t.installationId === installationId);
    },
    close: () => closeServer(server),
  };
}

function checkJwt(
  jwt: string | undefined,
  key: KeyObject,
  appId: number,
  now: number,
): { claims: Record<string, unknown> | undefined; error?: string } {
  if (jwt === undefined) return { claims: undefined, error: 'no bearer token' };
  const parts = jwt.split('.');
  if (parts.length !== 3) return { claims: undefined, error: 'not a JWT' };
  const [h, p, s] = parts as [string, string, string];
  let header: Record<string, unknown>;
  let claims: Record<string, unknown>;
  try {
    header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as Record<string, unknown>;
    claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return { claims: undefined, error: 'undecodable' };
  }
  if (header['alg'] !== 'RS256') return { claims, error: `alg ${String(header['alg'])}` };
  if (!verify('RSA-SHA256', Buffer.from(`${h}.${p}`), key, Buffer.from(s, 'base64url'))) return { claims, error: 'bad signature' };
  if (String(claims['iss']) !== String(appId)) return { claims, error: 'wrong iss' };
  const { iat, exp } = claims;
  if (typeof iat !== 'number' || typeof exp !== 'number') return { claims, error: 'iat/exp missing' };
  if (exp <= now) return { claims, error: 'expired' };
  if (iat > now + 60) return { claims, error: 'issued in the future' };
  if (exp - iat > MAX_JWT_LIFETIME_S || exp > now + MAX_JWT_LIFETIME_S) return { claims, error: 'exp too far in the future' };
  return { claims };
}
