// A local stand-in for the GitHub endpoints Slipway calls, with GitHub's documented shapes:
// - POST /app/installations/{id}/access_tokens (app JWT; optional `repositories` restricts the
//   token to those repositories of the installation, 422 for one it does not cover);
// - GET /app (app JWT): the app, with its html_url; GET /app/installations/{id}: one installation;
// - GET /installation/repositories (installation token): the repositories the token may read;
// - POST /login/oauth/access_token (client id + secret + code; errors are 200 with `error`);
// - GET /user/installations (user token): the app's installations the user may access.
// JWTs are verified with the app's public key, as GitHub does. Tokens it issues can be checked by
// the Git server.
import { generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
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
  /** the `repositories` asked for, when the body named some */
  repositories?: string[];
}

export interface FakeInstallation {
  id: number;
  /** the account the app is installed on */
  account: string;
  /** `owner/name` of every repository it covers */
  repositories: string[];
}

export interface IssuedToken {
  installationId: number;
  expiresAt: Date;
  /** repository names (without owner) the token is restricted to; absent: every one of the installation */
  repositories?: string[];
}

export interface FakeGitHub {
  /** the API base URL, `http://127.0.0.1:<port>`; also the web URL (`/login/oauth/access_token`) */
  url: string;
  appId: number;
  /** PEM, PKCS#1 like the file GitHub hands out */
  privateKeyPem: string;
  publicKey: KeyObject;
  clientId: string;
  clientSecret: string;
  /** GET /app's html_url: `<url>/apps/slipway-test` */
  htmlUrl: string;
  /** every access_tokens request, in order */
  calls: AccessTokenCall[];
  /** every request to the other endpoints: `METHOD /path status` */
  requests: string[];
  /** every token issued, with its installation */
  issued: Map<string, IssuedToken>;
  installations: Map<number, FakeInstallation>;
  /** true when `token` was issued for `installationId` (and may read `repoFullName`) and has not expired (by the fake's clock) */
  isValid(token: string, installationId?: number, repoFullName?: string): boolean;
  /** a one-time authorization code of GitHub user `login`, as the setup redirect carries it */
  codeFor(login: string): string;
  /** lets user `login` access the installation (GET /user/installations lists it) */
  grant(login: string, installationId: number): void;
  /** the app is uninstalled from that account: its tokens stop working, new ones are refused */
  uninstall(installationId: number): void;
  close(): Promise<void>;
}

export interface FakeGitHubOptions {
  appId?: number;
  /** installations that exist (ids alone cover no repository); others answer 404 */
  installations?: (number | FakeInstallation)[];
  /** GitHub users and the installations each may access */
  users?: Record<string, number[]>;
  /** how long issued tokens live; GitHub: one hour */
  tokenLifetimeMs?: number;
  clock?: Clock;
}

const MAX_JWT_LIFETIME_S = 10 * 60;
const DOCS = 'https://docs.github.com/rest';

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startFakeGitHub(opts: FakeGitHubOptions = {}): Promise<FakeGitHub> {
  const appId = opts.appId ?? 424242;
  const installations = new Map<number, FakeInstallation>(
    (opts.installations ?? [1001]).map((i) => (typeof i === 'number' ? { id: i, account: `account-${String(i)}`, repositories: [] } : { ...i, repositories: [...i.repositories] })).map((i) => [i.id, i]),
  );
  const users = new Map<string, Set<number>>(Object.entries(opts.users ?? {}).map(([login, ids]) => [login, new Set(ids)]));
  const lifetime = opts.tokenLifetimeMs ?? 60 * 60_000;
  const clock = opts.clock ?? systemClock;
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privateKeyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const clientId = `Iv1.${randomBytes(8).toString('hex')}`;
  const clientSecret = randomBytes(20).toString('hex');
  const calls: AccessTokenCall[] = [];
  const requests: string[] = [];
  const issued = new Map<string, IssuedToken>();
  /** code → login, unused */
  const codes = new Map<string, { login: string; expiresAt: number }>();
  /** user access token → login */
  const userTokens = new Map<string, string>();
  let htmlUrl = '';

  const liveToken = (token: string | undefined): IssuedToken | undefined => {
    const t = token === undefined ? undefined : issued.get(token);
    return t !== undefined && t.expiresAt.getTime() > clock.now().getTime() && installations.has(t.installationId) ? t : undefined;
  };

  const server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      const url = new URL(req.url ?? '/', 'http://x');
      const path = url.pathname;
      const send = (status: number, payload: unknown) => {
        if (!/\/access_tokens$/.test(path)) requests.push(`${req.method ?? ''} ${path} ${String(status)}`);
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(payload));
      };
      const header = (name: string) => {
        const v = req.headers[name];
        return Array.isArray(v) ? v.join(', ') : v;
      };
      const now = Math.floor(clock.now().getTime() / 1000);
      const jwtOk = (): Record<string, unknown> | string => {
        const jwt = /^Bearer (.+)$/.exec(header('authorization') ?? '')?.[1];
        const checked = checkJwt(jwt, publicKey, appId, now);
        return checked.error ?? checked.claims ?? {};
      };
      const page = <T>(items: T[]): T[] => {
        const perPage = Math.min(100, Number(url.searchParams.get('per_page') ?? '30') || 30);
        const n = Math.max(1, Number(url.searchParams.get('page') ?? '1') || 1);
        return items.slice((n - 1) * perPage, n * perPage);
      };

      const token = /^\/app\/installations\/([^/]+)\/access_tokens$/.exec(path);
      if (req.method === 'POST' && token?.[1] !== undefined) {
        const call: AccessTokenCall = {
          installationId: token[1],
          status: 0,
          headers: { accept: header('accept'), apiVersion: header('x-github-api-version'), userAgent: header('user-agent') },
          claims: undefined,
        };
        calls.push(call);
        let repositories: string[] | undefined;
        if (body !== '') {
          const parsed = JSON.parse(body) as { repositories?: unknown };
          if (Array.isArray(parsed.repositories)) repositories = parsed.repositories.map(String);
        }
        if (repositories !== undefined) call.repositories = repositories;
        const jwt = /^Bearer (.+)$/.exec(header('authorization') ?? '')?.[1];
        const checked = checkJwt(jwt, publicKey, appId, now);
        call.claims = checked.claims;
        if (checked.error !== undefined) {
          call.rejected = checked.error;
          call.status = 401;
          send(401, { message: 'A JSON web token could not be decoded', documentation_url: DOCS });
          return;
        }
        const installation = installations.get(Number(token[1]));
        if (installation === undefined) {
          call.status = 404;
          send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app' });
          return;
        }
        if (repositories !== undefined) {
          const names = new Set(installation.repositories.map((r) => (r.split('/')[1] ?? r).toLowerCase()));
          if (repositories.some((r) => !names.has(r.toLowerCase()))) {
            call.status = 422;
            send(422, { message: 'There is at least one repository that does not exist or is not accessible to the parent installation.', documentation_url: DOCS, status: '422' });
            return;
          }
        }
        const t = `ghs_${randomBytes(18).toString('hex')}`;
        // GitHub states expiry to the second
        const expiresAt = new Date(Math.floor((clock.now().getTime() + lifetime) / 1000) * 1000);
        issued.set(t, { installationId: installation.id, expiresAt, ...(repositories === undefined ? {} : { repositories }) });
        call.status = 201;
        send(201, {
          token: t,
          expires_at: expiresAt.toISOString().replace(/\.\d{3}Z$/, 'Z'),
          permissions: { contents: 'read', metadata: 'read' },
          repository_selection: repositories === undefined ? 'all' : 'selected',
        });
        return;
      }

      if (req.method === 'GET' && path === '/app') {
        const claims = jwtOk();
        if (typeof claims === 'string') {
          send(401, { message: 'A JSON web token could not be decoded', documentation_url: DOCS });
          return;
        }
        send(200, { id: appId, slug: 'slipway-test', client_id: clientId, name: 'Slipway test', owner: { login: 'slipway' }, html_url: htmlUrl, permissions: { contents: 'read', metadata: 'read' }, events: ['push'] });
        return;
      }

      const one = /^\/app\/installations\/([0-9]+)$/.exec(path);
      if (req.method === 'GET' && one?.[1] !== undefined) {
        if (typeof jwtOk() === 'string') {
          send(401, { message: 'A JSON web token could not be decoded', documentation_url: DOCS });
          return;
        }
        const i = installations.get(Number(one[1]));
        if (i === undefined) {
          send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app' });
          return;
        }
        send(200, { id: i.id, app_id: appId, app_slug: 'slipway-test', target_type: 'Organization', account: { login: i.account, id: 9000 + i.id, type: 'Organization' }, repository_selection: 'selected' });
        return;
      }

      if (req.method === 'GET' && path === '/installation/repositories') {
        const given = /^(?:token|Bearer) (.+)$/.exec(header('authorization') ?? '')?.[1];
        const t = liveToken(given);
        if (t === undefined) {
          send(401, { message: 'Bad credentials', documentation_url: DOCS });
          return;
        }
        const installation = installations.get(t.installationId);
        const all = (installation?.repositories ?? []).filter((r) => t.repositories === undefined || t.repositories.some((n) => n.toLowerCase() === (r.split('/')[1] ?? '').toLowerCase()));
        send(200, {
          total_count: all.length,
          repository_selection: 'selected',
          repositories: page(all).map((full, i) => ({ id: 5000 + i, name: full.split('/')[1], full_name: full, private: true, owner: { login: full.split('/')[0] } })),
        });
        return;
      }

      if (req.method === 'POST' && path === '/login/oauth/access_token') {
        const params: Record<string, unknown> = (header('content-type') ?? '').includes('json')
          ? (JSON.parse(body === '' ? '{}' : body) as Record<string, unknown>)
          : Object.fromEntries(new URLSearchParams(body));
        if (params['client_id'] !== clientId || params['client_secret'] !== clientSecret) {
          send(200, { error: 'incorrect_client_credentials', error_description: 'The client_id and/or client_secret passed are incorrect.', error_uri: DOCS });
          return;
        }
        const code = typeof params['code'] === 'string' ? codes.get(params['code']) : undefined;
        if (code === undefined || code.expiresAt <= clock.now().getTime()) {
          send(200, { error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.', error_uri: DOCS });
          return;
        }
        codes.delete(params['code'] as string);
        const access = `ghu_${randomBytes(18).toString('hex')}`;
        userTokens.set(access, code.login);
        send(200, { access_token: access, expires_in: 28800, refresh_token: `ghr_${randomBytes(30).toString('hex')}`, refresh_token_expires_in: 15897600, scope: '', token_type: 'bearer' });
        return;
      }

      if (req.method === 'GET' && path === '/user/installations') {
        const given = /^(?:token|Bearer) (.+)$/.exec(header('authorization') ?? '')?.[1];
        const login = given === undefined ? undefined : userTokens.get(given);
        if (login === undefined) {
          send(401, { message: 'Bad credentials', documentation_url: DOCS });
          return;
        }
        const mine = [...(users.get(login) ?? [])].flatMap((id) => {
          const i = installations.get(id);
          return i === undefined ? [] : [i];
        });
        send(200, {
          total_count: mine.length,
          installations: page(mine).map((i) => ({
            id: i.id,
            app_id: appId,
            app_slug: 'slipway-test',
            target_type: 'Organization',
            account: { login: i.account, id: 9000 + i.id, type: 'Organization' },
            repository_selection: 'selected',
            permissions: { contents: 'read', metadata: 'read' },
          })),
        });
        return;
      }

      send(404, { message: 'Not Found', documentation_url: DOCS });
    })().catch(() => {
      res.writeHead(500).end();
    });
  });

  const url = await listen(server);
  htmlUrl = `${url}/apps/slipway-test`;
  return {
    url,
    appId,
    privateKeyPem,
    publicKey,
    clientId,
    clientSecret,
    htmlUrl,
    calls,
    requests,
    issued,
    installations,
    isValid: (t, installationId, repoFullName) => {
      const found = liveToken(t);
      if (found === undefined || (installationId !== undefined && found.installationId !== installationId)) return false;
      if (repoFullName === undefined) return true;
      const installation = installations.get(found.installationId);
      const covered = installation?.repositories.some((r) => r.toLowerCase() === repoFullName.toLowerCase()) ?? false;
      const name = (repoFullName.split('/')[1] ?? '').toLowerCase();
      return covered && (found.repositories === undefined || found.repositories.some((r) => r.toLowerCase() === name));
    },
    codeFor: (login) => {
      const code = randomBytes(10).toString('hex');
      codes.set(code, { login, expiresAt: clock.now().getTime() + 10 * 60_000 });
      return code;
    },
    grant: (login, installationId) => {
      const set = users.get(login) ?? new Set<number>();
      set.add(installationId);
      users.set(login, set);
    },
    uninstall: (installationId) => {
      installations.delete(installationId);
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
