// The source of a build: a shallow clone of one branch of `owner/repo` from the configured Git
// host (`--git-base-url`), through Debian's git CLI with argument arrays (STYLE habit 9).
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve as resolvePath } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Checkout, FetchRequest, GitSource as GitSourcePort } from '../../domain/ports.js';

export type { Checkout, FetchRequest } from '../../domain/ports.js';

export type GitSourceErrorCode =
  | 'invalid'
  | 'repo_not_found'
  | 'branch_not_found'
  | 'commit_not_found'
  /** the commit asked for (with requireHead) is no longer the branch's head */
  | 'not_head'
  /** private repository without a token, or a token the host refused */
  | 'access_denied'
  | 'unreachable'
  | 'timed_out'
  | 'cancelled'
  | 'failed';

/** A fetch that did not happen; the message is one sentence fit for a deployment's `error`, free of secrets. */
export class GitSourceError extends Error {
  constructor(
    readonly code: GitSourceErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'GitSourceError';
  }
}

export interface GitSourceOptions {
  /** `--git-base-url`: `https://github.com`, `http://127.0.0.1:8080/git`, `file:///srv/git` */
  baseUrl: string;
  /** the git program; default `git` on PATH */
  git?: string;
  /** for each fetch that names none; default 10 minutes */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 10 * 60_000;
const SEGMENT = /^[A-Za-z0-9_.-]+$/;
const FULL_SHA = /^([0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * What git inherits from Slipway's environment: the program search path, the way out through
 * a proxy, and the certificate authorities to trust. Nothing else: Slipway's own variables
 * (SLIPWAY_* secrets: the webhook secret, the database URL) never reach git or the hooks,
 * helpers and proxies it runs, and neither do the variables that would aim it at another
 * repository or configuration (GIT_DIR, GIT_CONFIG_*, ...).
 */
const INHERITED_ENV = [
  'PATH',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'no_proxy', 'all_proxy',
  'SSL_CERT_FILE', 'SSL_CERT_DIR', 'GIT_SSL_CAINFO', 'GIT_SSL_CAPATH',
];

export interface GitEnvironmentOptions {
  /** an empty directory of Slipway's: git reads no user's ~/.gitconfig or credentials from it */
  home: string;
  /** the one protocol git may use (`https`, `http`, `file`): no redirect to plain http */
  protocol: string;
  /** configuration given through the environment (the token's extra header) */
  config?: readonly (readonly [key: string, value: string])[];
}

/**
 * The whole environment of a git process: INHERITED_ENV from `parent`, a scratch HOME, no
 * system configuration, C messages (matched by explain()), prompts and askpass helpers off (a
 * missing credential fails at once instead of hanging), and `config` as GIT_CONFIG_* pairs.
 */
export function gitEnvironment(parent: NodeJS.ProcessEnv, opts: GitEnvironmentOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of INHERITED_ENV) {
    const v = parent[k];
    if (v !== undefined) env[k] = v;
  }
  env['HOME'] = opts.home;
  env['LANG'] = 'C';
  env['LC_ALL'] = 'C';
  env['GIT_CONFIG_NOSYSTEM'] = '1';
  env['GIT_TERMINAL_PROMPT'] = '0';
  // empty, not unset: git then skips core.askPass and SSH_ASKPASS too
  env['GIT_ASKPASS'] = '';
  env['GIT_ALLOW_PROTOCOL'] = opts.protocol;
  const config = opts.config ?? [];
  env['GIT_CONFIG_COUNT'] = String(config.length);
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** Fetches repositories from one Git host. */
export class GitSource implements GitSourcePort {
  private readonly base: URL;
  private readonly git: string;
  private readonly timeoutMs: number;

  constructor(opts: GitSourceOptions) {
    const trimmed = opts.baseUrl.replace(/\/+$/, '');
    let base: URL;
    try {
      base = new URL(trimmed);
    } catch {
      throw new GitSourceError('invalid', 'The Git base URL must be an http(s):// or file:// URL.');
    }
    if (!['http:', 'https:', 'file:'].includes(base.protocol)) {
      throw new GitSourceError('invalid', 'The Git base URL must be an http(s):// or file:// URL.');
    }
    this.base = base;
    this.git = opts.git ?? 'git';
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** The host as shown in messages: the base URL without any user name or password. */
  get host(): string {
    return displayUrl(this.base.href).replace(/\/+$/, '');
  }

  /**
   * The URL git clones: `<base>/<owner>/<name>.git` over HTTP; under a file:// base the
   * directory `<owner>/<name>`, or `<owner>/<name>.git` when only that one exists.
   */
  async remoteUrl(repoFullName: string): Promise<string> {
    const segments = repoSegments(repoFullName);
    if (this.base.protocol !== 'file:') return `${this.base.href.replace(/\/+$/, '')}/${segments.join('/')}.git`;
    const root = fileURLToPath(this.base);
    for (const candidate of [join(root, ...segments), `${join(root, ...segments)}.git`]) {
      if (await isDirectory(candidate)) return pathToFileURL(candidate).href;
    }
    throw repoNotFound(segments.join('/'), this.host);
  }

  /** Clones `branch` of the repository with depth 1 into a fresh directory under `workDir`. */
  async fetch(req: FetchRequest): Promise<Checkout> {
    const repo = repoSegments(req.repoFullName).join('/');
    const branch = validBranch(req.branch);
    if (req.commitSha !== undefined && !FULL_SHA.test(req.commitSha)) {
      throw new GitSourceError('invalid', `The commit "${req.commitSha}" must be a full commit id (40 lowercase hex digits).`);
    }
    const timeoutMs = req.timeoutMs ?? this.timeoutMs;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new GitSourceError('invalid', 'The fetch time limit must be a positive number of milliseconds.');
    const deadline = new Deadline(timeoutMs, req.signal);
    let home: string | undefined;
    try {
      deadline.check(repo);
      const url = await this.remoteUrl(repo);
      const workDir = resolvePath(req.workDir);
      await mkdir(workDir, { recursive: true });
      // git's HOME: empty, so that no user's git configuration or credentials apply
      home = await mkdtemp(join(tmpdir(), 'slipway-git-home-'));
      const dir = await mkdtemp(join(workDir, `${repo.replace(/[^A-Za-z0-9_.-]+/g, '-')}-`));
      const ctx: RunContext = { env: this.environment(url, req.token, home), deadline, repo, branch, token: req.token };
      try {
        await this.run(ctx, 'clone', ['clone', '--quiet', '--depth', '1', '--single-branch', '--no-tags', '--branch', branch, '--', url, dir]);
        // the head's id and message in one git process (a process start is ~15 ms of a deploy here)
        let { commitSha, commitMessage } = await this.headCommit(ctx, dir);
        if (req.commitSha !== undefined && commitSha !== req.commitSha) {
          if (req.requireHead === true) {
            throw new GitSourceError('not_head', `${req.commitSha.slice(0, 12)} is no longer the head of ${branch} (now ${commitSha.slice(0, 12)}); the newer push deploys it.`);
          }
          await this.run(ctx, 'fetch', ['-C', dir, 'fetch', '--quiet', '--depth', '1', '--no-tags', 'origin', req.commitSha], req.commitSha);
          await this.run(ctx, 'inspect', ['-C', dir, 'checkout', '--quiet', '--detach', req.commitSha]);
          ({ commitSha, commitMessage } = await this.headCommit(ctx, dir));
        }
        if (req.keepGitDir !== true) await rm(join(dir, '.git'), { recursive: true, force: true });
        return { dir, commitSha, commitMessage };
      } catch (err) {
        await rm(dir, { recursive: true, force: true });
        throw err;
      }
    } finally {
      deadline.dispose();
      if (home !== undefined) await rm(home, { recursive: true, force: true });
    }
  }

  /** The checkout's HEAD: its full id and its message. */
  private async headCommit(ctx: RunContext, dir: string): Promise<{ commitSha: string; commitMessage: string }> {
    const log = await this.run(ctx, 'inspect', ['-C', dir, 'log', '-1', '--format=%H%x00%B']);
    const nul = log.indexOf('\0');
    const commitSha = log.slice(0, nul).trim();
    if (nul === -1 || !FULL_SHA.test(commitSha)) throw new GitSourceError('failed', `Reading the commit of ${ctx.repo} failed.`);
    return { commitSha, commitMessage: log.slice(nul + 1).replace(/\s+$/, '') };
  }

  /** git's environment (gitEnvironment), with the token as an extra HTTP header for this host only. */
  private environment(url: string, token: string | undefined, home: string): NodeJS.ProcessEnv {
    const config: [string, string][] = [];
    if (token !== undefined && token !== '' && this.base.protocol !== 'file:') {
      const basic = Buffer.from(`x-access-token:${token}`, 'utf8').toString('base64');
      config.push([`http.${new URL(url).origin}/.extraHeader`, `Authorization: Basic ${basic}`]);
    }
    return gitEnvironment(process.env, { home, protocol: this.base.protocol.replace(':', ''), config });
  }

  private async run(ctx: RunContext, step: Step, args: string[], sha?: string): Promise<string> {
    ctx.deadline.check(ctx.repo);
    const result = await runProcess(this.git, args, ctx.env, ctx.deadline.signal);
    if (result.spawnError !== undefined) {
      throw new GitSourceError('failed', `The git program could not be started (${result.spawnError}); install git or set its path.`);
    }
    ctx.deadline.check(ctx.repo);
    if (result.code !== 0) throw this.explain(ctx, step, redact(result.stderr, ctx.token), sha);
    return result.stdout;
  }

  /** git's C-locale stderr → one sentence. */
  private explain(ctx: RunContext, step: Step, stderr: string, sha: string | undefined): GitSourceError {
    const { repo, branch } = ctx;
    const host = this.host;
    if (/Remote branch .* not found in upstream/.test(stderr)) {
      return new GitSourceError('branch_not_found', `Branch "${branch}" was not found in ${repo}.`);
    }
    if (step === 'fetch' && /not our ref|couldn't find remote ref|no such remote ref/i.test(stderr)) {
      return new GitSourceError('commit_not_found', `Commit ${sha ?? ''} was not found in ${repo}.`);
    }
    if (/repository '.*' (not found|does not exist)|does not appear to be a git repository/.test(stderr)) {
      return repoNotFound(repo, host);
    }
    if (/could not read (Username|Password)|Authentication failed|terminal prompts disabled|returned error: 40[13]/.test(stderr)) {
      return ctx.token === undefined || ctx.token === ''
        ? new GitSourceError('access_denied', `Repository ${repo} was not found at ${host}, or it is private and no access token was given (connect a GitHub App installation).`)
        : new GitSourceError('access_denied', `${host} refused the access token for ${repo}: the repository does not exist or the token does not grant access to it.`);
    }
    const unreachable = /unable to access '[^']*': (.*)/.exec(stderr);
    if (unreachable?.[1] !== undefined) {
      return new GitSourceError('unreachable', `The Git host ${host} could not be reached: ${unreachable[1].trim().replace(/\.?$/, '.')}`);
    }
    const fatal = stderr.split('\n').filter((l) => l.startsWith('fatal:')).pop()?.replace(/^fatal:\s*/, '') ?? stderr.trim().split('\n').pop() ?? '';
    const what = step === 'clone' ? `Cloning ${repo}` : step === 'fetch' ? `Fetching commit ${sha ?? ''} of ${repo}` : `Reading the checkout of ${repo}`;
    return new GitSourceError('failed', `${what} failed: ${fatal === '' ? 'git gave no reason' : fatal}.`.replace(/\.\.$/, '.'));
  }
}

type Step = 'clone' | 'fetch' | 'inspect';

interface RunContext {
  env: NodeJS.ProcessEnv;
  deadline: Deadline;
  repo: string;
  branch: string;
  token: string | undefined;
}

/** The time limit and the caller's signal, as one signal that stops every git process of a fetch. */
class Deadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private reason: 'timed_out' | 'cancelled' | undefined;
  private readonly onAbort = () => { this.stop('cancelled'); };

  constructor(
    private readonly timeoutMs: number,
    private readonly outer: AbortSignal | undefined,
  ) {
    this.timer = setTimeout(() => { this.stop('timed_out'); }, timeoutMs);
    if (outer?.aborted === true) this.stop('cancelled');
    else outer?.addEventListener('abort', this.onAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  check(repo: string): void {
    if (this.reason === 'timed_out') {
      throw new GitSourceError('timed_out', `Fetching ${repo} took longer than ${formatDuration(this.timeoutMs)} and was stopped.`);
    }
    if (this.reason === 'cancelled') throw new GitSourceError('cancelled', `Fetching ${repo} was cancelled.`);
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.outer?.removeEventListener('abort', this.onAbort);
  }

  private stop(reason: 'timed_out' | 'cancelled'): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    this.controller.abort();
  }
}

interface ProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
  spawnError?: string;
}

const OUTPUT_LIMIT = 1024 * 1024;

/**
 * Runs git in a process group of its own: git clone works through helper processes
 * (git-remote-http, index-pack), and an abort must stop all of them, not just the parent.
 */
function runProcess(file: string, args: string[], env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<ProcessResult> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (stdout.length < OUTPUT_LIMIT) stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < OUTPUT_LIMIT) stderr += chunk.toString('utf8');
    });
    const kill = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    };
    signal.addEventListener('abort', kill, { once: true });
    if (signal.aborted) kill();
    child.on('error', (err) => {
      signal.removeEventListener('abort', kill);
      resolve({ code: null, stdout, stderr, spawnError: err.message });
    });
    child.on('close', (code) => {
      signal.removeEventListener('abort', kill);
      resolve({ code, stdout, stderr });
    });
  });
}

function repoSegments(fullName: string): string[] {
  const segments = fullName.replace(/\.git$/, '').split('/');
  if (segments.length < 2 || segments.some((s) => !SEGMENT.test(s) || s === '.' || s === '..')) {
    throw new GitSourceError('invalid', `The repository "${fullName}" must be written owner/name (letters, digits, "-", "_" and ".").`);
  }
  return segments;
}

/** The rules of `git check-ref-format --branch`, in short; a leading "-" could read as an option. */
function validBranch(branch: string): string {
  const bad =
    branch === '' ||
    branch.startsWith('-') ||
    branch.startsWith('/') ||
    branch.endsWith('/') ||
    branch.endsWith('.') ||
    branch.endsWith('.lock') ||
    branch === '@' ||
    branch.includes('..') ||
    branch.includes('//') ||
    branch.includes('@{') ||
    branch.split('/').some((part) => part.startsWith('.')) ||
    // eslint-disable-next-line no-control-regex
    /[\x00-\x20\x7f~^:?*[\\]/.test(branch);
  if (bad) throw new GitSourceError('invalid', `"${branch}" is not a valid Git branch name.`);
  return branch;
}

function repoNotFound(repo: string, host: string): GitSourceError {
  return new GitSourceError('repo_not_found', `Repository ${repo} was not found at ${host}.`);
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** A URL without its user name and password. */
function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.href;
  } catch {
    return url;
  }
}

/** Git never prints the header, but what it prints is echoed to users: take no chances. */
function redact(text: string, token: string | undefined): string {
  if (token === undefined || token === '') return text;
  const basic = Buffer.from(`x-access-token:${token}`, 'utf8').toString('base64');
  return text.split(token).join('***').split(basic).join('***');
}

function formatDuration(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}
