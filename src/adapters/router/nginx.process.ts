import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { chmod, open, readdir, readFile, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { delimiter, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import type { Clock } from '../../domain/clock.js';
import type { NginxConfigSettings, nginxPaths } from './nginx.config.js';
import type { LogMark, NginxLogs } from './nginx.logs.js';
import type { RouterLog } from './router.js';

/** Where nginx is looked for after PATH (Debian puts it in /usr/sbin, often not on a user's PATH). */
const NGINX_LOCATIONS = ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/bin/nginx', '/opt/homebrew/bin/nginx', '/usr/bin/nginx'];

/** The nginx binary to use: on PATH or in the usual places; undefined when there is none. */
export function findNginx(path = process.env['PATH'] ?? ''): string | undefined {
  const candidates = [...path.split(delimiter).filter((d) => d !== '').map((d) => join(d, 'nginx')), ...NGINX_LOCATIONS];
  return candidates.find(isExecutable);
}

/** `binary` when it can be run, else the one findNginx() finds; undefined when there is none. */
export function nginxBinary(binary?: string): string | undefined {
  if (binary !== undefined) return isExecutable(binary) ? binary : undefined;
  return findNginx();
}

export function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export class NginxMissingError extends Error {
  constructor(binary: string | undefined) {
    super(
      `nginx was not found${binary === undefined ? ' (looked on PATH and in /usr/sbin)' : ` at ${binary}`}. ` +
        'Install it (Debian/Ubuntu: apt-get install nginx-light) or choose the built-in Node router.',
    );
    this.name = 'NginxMissingError';
  }
}

export const execFileP = promisify(execFile);
export const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));
const sleep = (ms: number): Promise<void> => new Promise((r) => { setTimeout(r, ms); });

/** Which optional modules this nginx has (their temp paths must be set, or it uses /var/lib/nginx). */
export async function nginxModules(binary: string): Promise<NginxConfigSettings['modules']> {
  let out: string;
  try {
    const r = await execFileP(binary, ['-V'], { timeout: 10_000 });
    out = `${r.stdout}${r.stderr}`;
  } catch (err) {
    throw new Error(`${binary} -V failed: is it nginx? ${errorMessage(err)}`);
  }
  if (!out.includes('nginx version:')) throw new Error(`${binary} does not look like nginx (-V printed no version).`);
  return {
    fastcgi: !out.includes('--without-http_fastcgi_module'),
    uwsgi: !out.includes('--without-http_uwsgi_module'),
    scgi: !out.includes('--without-http_scgi_module'),
  };
}

export interface NginxProcessOptions {
  /** nginx's own directory, absolute */
  dir: string;
  paths: ReturnType<typeof nginxPaths>;
  logs: NginxLogs;
  clock: Clock;
  log: RouterLog;
  /** how long a start or a reload may take before it is reported as failed */
  reloadTimeoutMs: number;
  /** how long stop() lets nginx finish gracefully before killing it */
  stopTimeoutMs: number;
  /** how long a reload's drain waits for old workers to finish their requests */
  drainTimeoutMs: number;
  /** whether an nginx that exits now is restarted (the driver is started, not stopping) */
  supervised: () => boolean;
  /** brings nginx back after an unexpected exit (the driver rewrites the config and calls launch()) */
  restart: () => Promise<void>;
}

interface Master {
  pid: number;
  /** undefined for an adopted nginx: not our child, watched by polling */
  child: ChildProcess | undefined;
  /** on the injected clock: a master that ran this long before it exited was no crash loop */
  startedAt: number;
}

/**
 * The nginx master process, as Slipway supervises it: spawning it detached in its own process
 * group (so that it outlives a Slipway that is killed), adopting one left running (pid file
 * and /proc), graceful reloads (SIGHUP, the control socket's generation answer, and /proc scans
 * for the old workers' drain), log reopening (SIGUSR1), restarts with back-off after an
 * unexpected exit, and the stop (SIGQUIT, then SIGKILL of the group). What nginx runs, the
 * config and its transaction, is nginx.driver.ts's.
 *
 * Waits for nginx (start, reload, drain, stop) are real waits: their timeouts run on monotonic
 * time (performance.now()), never on the injected clock, which tests may move by hand.
 */
export class NginxProcess {
  private master: Master | undefined;
  private adoptedMaster = false;
  private crashes = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private watchTimer: NodeJS.Timeout | undefined;

  private readonly dir: string;
  private readonly paths: ReturnType<typeof nginxPaths>;
  private readonly logs: NginxLogs;
  private readonly clock: Clock;
  private readonly log: RouterLog;
  private readonly reloadTimeoutMs: number;
  private readonly stopTimeoutMs: number;
  private readonly drainTimeoutMs: number;
  private readonly supervised: () => boolean;
  private readonly restart: () => Promise<void>;

  constructor(o: NginxProcessOptions) {
    this.dir = o.dir;
    this.paths = o.paths;
    this.logs = o.logs;
    this.clock = o.clock;
    this.log = o.log;
    this.reloadTimeoutMs = o.reloadTimeoutMs;
    this.stopTimeoutMs = o.stopTimeoutMs;
    this.drainTimeoutMs = o.drainTimeoutMs;
    this.supervised = o.supervised;
    this.restart = o.restart;
  }

  /** the master's pid while it runs */
  get pid(): number | undefined {
    return this.master?.pid;
  }

  get running(): boolean {
    return this.master !== undefined;
  }

  /** true when an nginx of a previous Slipway was found running and taken over */
  get adopted(): boolean {
    return this.adoptedMaster;
  }

  /** A master of ours still running (after a Slipway crash or release()), from the pid file. */
  async findRunning(): Promise<number | undefined> {
    let pid: number;
    try {
      pid = Number.parseInt((await readFile(this.paths.pid, 'utf8')).trim(), 10);
    } catch {
      return undefined;
    }
    if (!Number.isInteger(pid) || pid <= 1 || !(await isAlive(pid))) return undefined;
    const cmdline = await readCmdline(pid);
    // Without /proc the process cannot be told from an unrelated one that reused the pid.
    if (cmdline === undefined || !cmdline.includes('nginx: master process') || !cmdline.includes(this.paths.conf)) return undefined;
    return pid;
  }

  /** Supervise the running master `pid` (found by findRunning()). */
  adopt(pid: number): void {
    this.adoptedMaster = true;
    this.master = { pid, child: undefined, startedAt: this.clock.now().getTime() };
    this.watch(this.master);
  }

  /** Runs nginx on the config on disk and waits until it answers with `generation`. */
  async launch(binary: string, generation: string): Promise<void> {
    const { paths, logs } = this;
    await rm(paths.control, { force: true });
    // nginx is not running: its logs are renamed without telling it
    await logs.rotate(undefined);
    const stderrFrom = await logs.mark(paths.stderr);
    const errorsFrom = await logs.mark();
    const stderr = await open(paths.stderr, 'a');
    let child: ChildProcess;
    try {
      child = spawn(binary, ['-p', `${this.dir}/`, '-e', paths.errorLog, '-c', paths.conf], {
        detached: true,
        stdio: ['ignore', 'ignore', stderr.fd],
      });
    } finally {
      await stderr.close();
    }
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    if (child.pid === undefined) throw new Error(`nginx could not be started (${binary}): ${(await spawnError).message}`);
    const m: Master = { pid: child.pid, child, startedAt: this.clock.now().getTime() };
    this.master = m;
    child.once('exit', (code, signal) => { this.onExit(m, code === null ? `signal ${String(signal)}` : `code ${code}`); });
    const deadline = performance.now() + this.reloadTimeoutMs;
    for (;;) {
      if (this.master !== m) {
        const reason = (await logs.since(stderrFrom, paths.stderr)).trim() || (await this.reasonSince(errorsFrom)).trim();
        throw new Error(`nginx exited at start: ${reason === '' ? 'no message' : reason}`);
      }
      if ((await probe(paths.control).catch(() => undefined)) === generation) {
        await this.narrowControl();
        break;
      }
      if (performance.now() > deadline) {
        await this.kill(m);
        throw new Error(`nginx did not answer within ${this.reloadTimeoutMs} ms of starting.${await this.reasonSince(errorsFrom)}`);
      }
      await sleep(20);
    }
    this.log.info({ nginxPid: m.pid }, 'router: nginx running');
  }

  /** SIGHUP, then wait until the new workers answer and the old ones have stopped taking requests. */
  async reload(generation: string): Promise<{ drained: Promise<void> }> {
    const m = this.master;
    if (m === undefined) throw new Error('nginx is not running: nothing to reload.');
    const { paths, logs } = this;
    // Workers still shutting down from an earlier reload were waited for by that apply.
    const old = await filterAsync(await workerPids(m.pid), async (pid) => !(await isShuttingDown(pid)));
    await logs.rotate(() => { process.kill(m.pid, 'SIGUSR1'); });
    const errorsFrom = await logs.mark();
    process.kill(m.pid, 'SIGHUP');
    const deadline = performance.now() + this.reloadTimeoutMs;
    for (;;) {
      if (this.master !== m) throw new Error(`nginx exited during a reload.${await this.reasonSince(errorsFrom)}`);
      const answered = await probe(paths.control).catch(() => undefined);
      if (answered === generation && (await everyAsync(old, async (pid) => !(await isAlive(pid)) || (await isShuttingDown(pid))))) {
        await this.narrowControl();
        break;
      }
      if (performance.now() > deadline) {
        throw new Error(`nginx did not take the new router config within ${this.reloadTimeoutMs} ms.${await this.reasonSince(errorsFrom)}`);
      }
      await sleep(10);
    }
    // A wrapper, not the promise itself: awaiting reload() must not wait for the drain.
    return { drained: waitUntil(() => everyAsync(old, async (pid) => !(await isAlive(pid))), this.drainTimeoutMs) };
  }

  /** No more restarts or watching: the driver is stopping or handing nginx over. */
  unsupervise(): void {
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    if (this.watchTimer !== undefined) clearInterval(this.watchTimer);
    this.restartTimer = undefined;
    this.watchTimer = undefined;
  }

  /** Stops nginx: gracefully (SIGQUIT), then SIGKILL of the whole group when it takes too long. */
  async stop(): Promise<void> {
    this.unsupervise();
    const m = this.master;
    this.master = undefined;
    if (m !== undefined) await this.kill(m);
  }

  /** A start that failed: a master we spawned is stopped, an adopted one is left alone. */
  async discard(): Promise<void> {
    if (this.master?.child !== undefined) await this.kill(this.master);
    this.master = undefined;
  }

  /** Leaves nginx running without us (a Slipway that hands over to its next start, which adopts it). */
  release(): void {
    this.unsupervise();
    this.master?.child?.unref();
    this.master = undefined;
  }

  private onExit(m: Master, how: string): void {
    if (this.master !== m) return;
    this.master = undefined;
    // Orphaned workers would keep the port and refuse the next master's bind.
    killGroup(m.pid, 'SIGKILL');
    if (!this.supervised()) return;
    if (this.clock.now().getTime() - m.startedAt > 10_000) this.crashes = 0;
    const delay = Math.min(5_000, 100 * 2 ** this.crashes);
    this.crashes += 1;
    this.log.error({ nginxPid: m.pid, exit: how, restartInMs: delay }, 'router: nginx exited unexpectedly; restarting it');
    this.scheduleRestart(delay);
  }

  private scheduleRestart(delay: number): void {
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.restart().catch((err: unknown) => {
        if (!this.supervised()) return;
        const next = Math.min(5_000, 100 * 2 ** this.crashes);
        this.crashes += 1;
        this.log.error({ err: errorMessage(err), restartInMs: next }, 'router: nginx failed to restart');
        this.scheduleRestart(next);
      });
    }, delay);
  }

  /** An adopted nginx is not our child: no exit event, so it is polled. */
  private watch(m: Master): void {
    let checking = false;
    const timer = setInterval(() => {
      if (checking) return;
      if (this.master !== m) {
        clearInterval(timer);
        return;
      }
      checking = true;
      void isAlive(m.pid).then((alive) => {
        checking = false;
        if (alive || this.master !== m) return;
        clearInterval(timer);
        this.onExit(m, 'gone');
      });
    }, 500);
    this.watchTimer = timer;
  }

  private async kill(m: Master): Promise<void> {
    try {
      process.kill(m.pid, 'SIGQUIT');
    } catch {
      // already gone
    }
    const exited = () => m.child === undefined || m.child.exitCode !== null || m.child.signalCode !== null;
    const gone = await waitUntilTrue(async () => !(await isAlive(m.pid)) && exited(), this.stopTimeoutMs);
    if (!gone) this.log.warn({ nginxPid: m.pid }, 'router: nginx did not stop gracefully in time; killing it');
    killGroup(m.pid, 'SIGKILL');
    await waitUntilTrue(async () => !(await isAlive(m.pid)), 2_000);
  }

  /** nginx creates its unix listener 0666; the directory already keeps others out, this narrows the socket too. */
  private async narrowControl(): Promise<void> {
    await chmod(this.paths.control, 0o600).catch(() => undefined);
  }

  /** The error lines nginx logged since `mark`, for a message. */
  private async reasonSince(mark: LogMark): Promise<string> {
    const lines = await this.logs.errorsSince(mark);
    return lines.length === 0 ? '' : ` nginx said: ${lines.slice(-3).join(' | ')}`;
  }
}

/** GET /generation on the control socket. */
function probe(socketPath: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: '/generation', agent: false, timeout: 1_000, headers: { host: 'control' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { body += c; });
      res.on('end', () => { resolve(body); });
      res.on('error', reject);
    });
    req.on('timeout', () => { req.destroy(new Error('probe timed out')); });
    req.on('error', reject);
    req.end();
  });
}

const hasProc = existsSync('/proc/self/stat');

/*
 * The /proc scans below run while a reload waits, on the API's event loop: they are
 * asynchronous (node:fs/promises), so that requests are served meanwhile.
 */

/** Linux: /proc/<pid>/stat, state Z (zombie) counting as gone. Elsewhere: signal 0. */
async function isAlive(pid: number): Promise<boolean> {
  if (hasProc) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function readCmdline(pid: number): Promise<string | undefined> {
  try {
    return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).replace(/\0/g, ' ');
  } catch {
    return undefined;
  }
}

/** nginx retitles a worker that got the graceful-shutdown signal and closed its listeners. */
async function isShuttingDown(pid: number): Promise<boolean> {
  return (await readCmdline(pid))?.includes('shutting down') ?? false;
}

/** The master's children (its workers), from /proc; [] where there is no /proc. */
async function workerPids(masterPid: number): Promise<number[]> {
  if (!hasProc) return [];
  const names = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  const parents = await Promise.all(
    names.map(async (name) => {
      try {
        const stat = await readFile(`/proc/${name}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      } catch {
        return undefined; // exited while listing
      }
    }),
  );
  return names.flatMap((name, i) => (parents[i] === masterPid ? [Number(name)] : []));
}

async function filterAsync<T>(items: readonly T[], keep: (item: T) => Promise<boolean>): Promise<T[]> {
  const kept = await Promise.all(items.map(keep));
  return items.filter((_, i) => kept[i]);
}

async function everyAsync<T>(items: readonly T[], check: (item: T) => Promise<boolean>): Promise<boolean> {
  for (const item of items) if (!(await check(item))) return false;
  return true;
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    // The group id is the master's pid (spawned detached): this reaches orphaned workers too.
    process.kill(-pid, signal);
  } catch {
    // nothing left in the group
  }
}

/** Polls `check` until it holds or `ms` of monotonic time have passed; false on the timeout. */
async function waitUntilTrue(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

function waitUntil(check: () => Promise<boolean>, ms: number): Promise<void> {
  return waitUntilTrue(check, ms).then(() => undefined);
}
