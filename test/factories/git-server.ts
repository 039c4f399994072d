// Real Git for the source tests: repositories made with the git CLI in a temp dir, served over
// smart HTTP by `git http-backend` (the CGI program Git ships) behind node:http on loopback.
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Git run by the tests sees neither the machine's nor the user's configuration. */
export const isolatedGitEnv = (): NodeJS.ProcessEnv => ({
  PATH: process.env['PATH'] ?? '/usr/bin:/bin',
  HOME: tmpdir(),
  LC_ALL: 'C',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Test Author',
  GIT_AUTHOR_EMAIL: 'author@example.com',
  GIT_COMMITTER_NAME: 'Test Author',
  GIT_COMMITTER_EMAIL: 'author@example.com',
});

export async function git(args: readonly string[], cwd?: string): Promise<string> {
  const { stdout } = await run('git', [...args], { env: isolatedGitEnv(), ...(cwd === undefined ? {} : { cwd }), maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

/** Files of a commit: text content, or null to delete the file. Paths are "/"-separated. */
export type FileChanges = Readonly<Record<string, string | null>>;

/**
 * One repository under a root: a bare repository `<root>/<owner>/<name>.git` (what the servers
 * serve) fed by a private working copy. Every commit is pushed at once.
 */
export class TestRepo {
  private constructor(
    /** `owner/name` */
    readonly fullName: string,
    /** the bare repository's directory */
    readonly bareDir: string,
    private readonly work: string,
  ) {}

  static async create(root: string, fullName: string, opts: { bareSuffix?: boolean; defaultBranch?: string } = {}): Promise<TestRepo> {
    const bareDir = join(root, opts.bareSuffix === false ? fullName : `${fullName}.git`);
    await mkdir(dirname(bareDir), { recursive: true });
    await git(['init', '--quiet', '--bare', '--initial-branch', opts.defaultBranch ?? 'main', bareDir]);
    const work = await mkdtemp(join(tmpdir(), 'slipway-repo-work-'));
    await git(['init', '--quiet', '--initial-branch', opts.defaultBranch ?? 'main', work]);
    await git(['remote', 'add', 'origin', bareDir], work);
    return new TestRepo(fullName, bareDir, work);
  }

  /** Commits the changes on `branch` (created from the current one when new) and pushes; returns the sha. */
  async commit(message: string, files: FileChanges, branch = 'main'): Promise<string> {
    const current = (await git(['symbolic-ref', '--short', 'HEAD'], this.work)).trim();
    if (current !== branch) {
      const exists = (await git(['branch', '--list', branch], this.work)).trim() !== '';
      await git(exists ? ['checkout', '--quiet', branch] : ['checkout', '--quiet', '-b', branch], this.work);
    }
    for (const [path, content] of Object.entries(files)) {
      const file = join(this.work, ...path.split('/'));
      if (content === null) {
        await rm(file, { force: true });
      } else {
        await mkdir(dirname(file), { recursive: true });
        await writeFile(file, content);
      }
    }
    await git(['add', '--all'], this.work);
    await git(['commit', '--quiet', '--allow-empty', '--message', message], this.work);
    await git(['push', '--quiet', 'origin', branch], this.work);
    return (await git(['rev-parse', 'HEAD'], this.work)).trim();
  }

  async dispose(): Promise<void> {
    await rm(this.work, { recursive: true, force: true });
  }
}

/** A temp directory holding bare repositories, e.g. the GIT_PROJECT_ROOT of a GitServer. */
export class RepoRoot {
  readonly repos: TestRepo[] = [];
  private constructor(readonly dir: string) {}

  static async create(): Promise<RepoRoot> {
    return new RepoRoot(await mkdtemp(join(tmpdir(), 'slipway-git-root-')));
  }

  async repo(fullName: string, opts: { bareSuffix?: boolean; defaultBranch?: string } = {}): Promise<TestRepo> {
    const repo = await TestRepo.create(this.dir, fullName, opts);
    this.repos.push(repo);
    return repo;
  }

  /** `file://<dir>`: a --git-base-url for local clones */
  get fileUrl(): string {
    return `file://${this.dir}`;
  }

  async dispose(): Promise<void> {
    await Promise.all(this.repos.map((r) => r.dispose()));
    await rm(this.dir, { recursive: true, force: true });
  }
}

export interface Credentials {
  username: string;
  password: string;
}

export interface GitServerOptions {
  /** GIT_PROJECT_ROOT */
  root: string;
  /**
   * Decides who may read `repoPath` ("owner/name.git"); undefined credentials when the request
   * carries none. Default: everyone. A refusal answers 401 with a Basic challenge.
   */
  authorize?: (credentials: Credentials | undefined, repoPath: string) => boolean;
}

export interface GitRequest {
  method: string;
  url: string;
  status: number;
  /** the Authorization header as received (tests check what was sent, never log it) */
  authorization: string | undefined;
}

export interface GitServer {
  /** `http://127.0.0.1:<port>`: a --git-base-url */
  url: string;
  requests: GitRequest[];
  close(): Promise<void>;
}

/** A Git smart-HTTP server on 127.0.0.1 and an ephemeral port. */
export async function startGitServer(opts: GitServerOptions): Promise<GitServer> {
  const requests: GitRequest[] = [];
  const server = createServer((req, res) => {
    const record: GitRequest = { method: req.method ?? 'GET', url: req.url ?? '/', status: 0, authorization: req.headers.authorization };
    requests.push(record);
    res.on('finish', () => {
      record.status = res.statusCode;
    });
    serveGit(opts, req, res);
  });
  return { url: await listen(server), requests, close: () => closeServer(server) };
}

function serveGit(opts: GitServerOptions, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://git.test');
  const pathInfo = decodeURIComponent(url.pathname);
  const repoPath = /^\/(.+?\.git)(\/|$)/.exec(pathInfo)?.[1] ?? pathInfo.replace(/^\//, '');
  const credentials = basicCredentials(req.headers.authorization);
  if (opts.authorize !== undefined && !opts.authorize(credentials, repoPath)) {
    req.resume();
    res.writeHead(401, { 'www-authenticate': 'Basic realm="git"', 'content-type': 'text/plain' }).end('authentication required\n');
    return;
  }
  const header = (name: string): string | undefined => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(', ') : v;
  };
  const env: NodeJS.ProcessEnv = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_PROJECT_ROOT: opts.root,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: pathInfo,
    QUERY_STRING: url.search.replace(/^\?/, ''),
    REQUEST_METHOD: req.method ?? 'GET',
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
  };
  const optional: Record<string, string | undefined> = {
    CONTENT_TYPE: header('content-type'),
    CONTENT_LENGTH: header('content-length'),
    // the client gzips large request bodies; http-backend inflates them when told
    HTTP_CONTENT_ENCODING: header('content-encoding'),
    // protocol v2 is negotiated through this header
    HTTP_GIT_PROTOCOL: header('git-protocol'),
    REMOTE_USER: credentials?.username,
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) env[k] = v;

  const cgi = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  req.pipe(cgi.stdin);
  cgi.stdin.on('error', () => undefined);
  let stderr = '';
  cgi.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));

  // CGI output: header lines, a blank line, then the body, streamed as it comes
  let head = Buffer.alloc(0);
  let headersDone = false;
  cgi.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const crlf = head.indexOf('\r\n\r\n');
    const lf = head.indexOf('\n\n');
    const end = crlf !== -1 && (lf === -1 || crlf < lf) ? { at: crlf, len: 4 } : lf !== -1 ? { at: lf, len: 2 } : undefined;
    if (end === undefined) return;
    headersDone = true;
    let status = 200;
    for (const line of head.subarray(0, end.at).toString('latin1').split(/\r?\n/)) {
      const colon = line.indexOf(':');
      if (colon === -1) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end.at + end.len));
  });
  cgi.on('close', (code) => {
    if (!headersDone) {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`git http-backend failed (${String(code)}): ${stderr}`);
      return;
    }
    res.end();
  });
  res.on('close', () => {
    if (cgi.exitCode === null) cgi.kill();
  });
}

function basicCredentials(header: string | undefined): Credentials | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header ?? '');
  if (m?.[1] === undefined) return undefined;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/**
 * A TCP server on loopback that accepts connections and never answers: a Git host that hangs,
 * for timeouts and cancellation.
 */
export async function startSilentServer(): Promise<{ url: string; connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let count = 0;
  const server = createTcpServer((socket) => {
    count++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('silent server has no TCP address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    connections: () => count,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => { resolve(); }));
    },
  };
}

/** A loopback port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => { resolve(); }));
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}

export async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('server has no TCP address');
  return `http://127.0.0.1:${address.port}`;
}

export async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve, reject) => {
    server.close((err) => {
      if (err === undefined) resolve();
      else reject(err);
    });
  });
}
