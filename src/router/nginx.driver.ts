import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { chmod, mkdir, open, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { delimiter, dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { systemRandom, type Random } from '../domain/clock.js';
import type { AcmeChallenges } from './acme-challenges.js';
import { AcmeResponder } from './acme-responder.js';
import { NginxLogs, type LogMark } from './nginx.logs.js';
import { assertSafeDir, nginxPaths, renderNginxConfig, type CertificateFiles, type NginxConfigSettings, type StagedUpstreams } from './nginx.config.js';
import { RouteTable, sameUpstreams, type ProjectRoutes, type Upstream } from './route-table.js';
import { silentLog, type ListenAddress, type RouterDriver, type RouterLog, type TlsCertificate, type TlsOptions } from './router.js';
import { checkCertificates, type CheckedCertificate } from './tls-certificates.js';

/**
 * The production data plane: nginx run as a child process that Slipway supervises, with its
 * own directory (config, pid, logs, temp paths; never /etc/nginx). A route change renders
 * nginx.conf, has `nginx -t` validate it, swaps it in and reloads gracefully with SIGHUP: the
 * old workers finish what they started, new connections go to the new workers, nothing is
 * refused. Applies run one at a time and bursts are coalesced into one reload.
 *
 * nginx runs in its own process group (detached), so it outlives a Slipway that is killed: the
 * next Slipway finds it through the pid file and adopts it, and the apps keep being served.
 */
export interface NginxDriverOptions {
  listen: ListenAddress;
  /** nginx's own directory (created; absolute or relative to the working directory) */
  dir: string;
  /** default: the first nginx found by findNginx() */
  binary?: string;
  workerProcesses?: number | 'auto';
  /** a replica that has not accepted the connection by then is skipped or answered 502; default 5 */
  connectTimeoutSec?: number;
  /** how long a WebSocket or a stream may stay silent; default 3600 */
  idleTimeoutSec?: number;
  /** how long old workers keep WebSockets and streams after a reload; default 240 */
  shutdownTimeoutSec?: number;
  /** how long apply() waits for old workers to finish their requests; default 10 s */
  drainTimeoutMs?: number;
  /** how long a start or a reload may take before it is reported as failed; default 15 s */
  reloadTimeoutMs?: number;
  /** how long stop() lets nginx finish gracefully before killing it; default 5 s */
  stopTimeoutMs?: number;
  accessLog?: boolean;
  /** the error and access logs are renamed to `<name>.1` (one old file kept) past this size; default 16 MiB */
  logRotateBytes?: number;
  scheme?: 'http' | 'https';
  /** the HTTPS listener, serving the hosts given to setCertificates(); absent: nothing listens for TLS */
  tls?: TlsOptions;
  /** HTTP-01 answers: nginx proxies `/.well-known/acme-challenge/` to a loopback responder serving them */
  challenges?: AcmeChallenges;
  log?: RouterLog;
  random?: Random;
}

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

function isExecutable(file: string): boolean {
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

const execFileP = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((r) => { setTimeout(r, ms); });

/** A project's next upstreams, in the config ahead of its switch (stage()). */
interface Stage {
  readonly project: string;
  readonly hosts: readonly string[];
  readonly upstreams: readonly Upstream[];
  /** the file whose existence switches the project's hosts over */
  readonly flag: string;
}

interface Master {
  pid: number;
  /** undefined for an adopted nginx: not our child, watched by polling */
  child: ChildProcess | undefined;
  startedAt: number;
}

export class NginxDriver implements RouterDriver {
  readonly name = 'nginx';
  private readonly dir: string;
  private readonly paths: ReturnType<typeof nginxPaths>;
  private readonly opts: NginxDriverOptions;
  private readonly log: RouterLog;
  private readonly random: Random;
  private binary: string | undefined;
  private modules: NginxConfigSettings['modules'] = { fastcgi: true, uwsgi: true, scgi: true };
  private state: 'new' | 'starting' | 'started' | 'stopped' | 'released' = 'new';
  private master: Master | undefined;
  private adoptedMaster = false;
  /** the config text as running, with the generation left out, to skip reloads that change nothing */
  private runningKey: string | undefined;
  private runningText: string | undefined;
  private counter = 0;
  private readonly nonce: string;
  private queue: Promise<unknown> = Promise.resolve();
  private wanted: RouteTable = RouteTable.empty();
  /** the table the running config routes by (undefined until the first apply after start) */
  private live: RouteTable | undefined;
  /** stage() calls not yet switched, by project */
  private readonly stages = new Map<string, Stage>();
  /** the stages the running config holds, by project */
  private runningStages: ReadonlyMap<string, Stage> = new Map();
  /** whether the workers can see flag files in the directory (see workersReach) */
  private canStage = false;
  private certificates: ReadonlyMap<string, CheckedCertificate> = new Map();
  /** whether apply() was called since start(): before it, an adopted nginx keeps its routes */
  private applied = false;
  private responder: AcmeResponder | undefined;
  private batch: Promise<{ drained: Promise<void> }> | undefined;
  private crashes = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private watchTimer: NodeJS.Timeout | undefined;
  private readonly logs: NginxLogs;

  constructor(opts: NginxDriverOptions) {
    this.opts = opts;
    this.dir = resolve(opts.dir);
    assertSafeDir(this.dir);
    this.paths = nginxPaths(this.dir);
    this.logs = new NginxLogs(this.paths.errorLog, [this.paths.accessLog], opts.logRotateBytes);
    this.binary = opts.binary;
    this.log = opts.log ?? silentLog;
    this.random = opts.random ?? systemRandom;
    this.nonce = this.random.bytes(4).toString('hex');
  }

  /** true when start() found an nginx of a previous Slipway still running and took it over */
  get adopted(): boolean {
    return this.adoptedMaster;
  }

  /** nginx's directory, absolute */
  get directory(): string {
    return this.dir;
  }

  /** the nginx master's pid while it runs */
  pid(): number | undefined {
    return this.master?.pid;
  }

  address(): ListenAddress {
    return this.opts.listen;
  }

  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`The nginx router was already ${this.state}.`);
    this.state = 'starting';
    try {
      this.binary ??= findNginx();
      if (this.binary === undefined || !isExecutable(this.binary)) throw new NginxMissingError(this.binary);
      this.modules = await this.inspect(this.binary);
      await this.prepareDir();
      if (this.opts.challenges !== undefined) {
        this.responder = new AcmeResponder(this.opts.challenges);
        await this.responder.start();
      }
      this.canStage = workersReach(this.dir);
      if (!this.canStage) {
        this.log.warn({ dir: this.dir }, 'router: nginx workers (user nobody) cannot reach the router directory, a parent being closed to others; switches wait for a full reload (chmod o+x the parents to switch sooner)');
      }
      const running = await this.findRunning();
      if (running !== undefined) {
        this.adoptedMaster = true;
        this.master = { pid: running.pid, child: undefined, startedAt: Date.now() };
        this.watch(this.master);
        this.log.info({ nginxPid: running.pid, dir: this.dir }, 'router: adopted the nginx left running by a previous Slipway');
      } else {
        const generation = this.nextGeneration();
        const text = this.render(RouteTable.empty(), generation);
        await this.validate(text);
        await rename(this.paths.next, this.paths.conf);
        await this.launch(generation);
        this.runningText = text;
        this.runningKey = this.render(RouteTable.empty(), '');
      }
      // stop() may have been called while nginx was starting.
      if (!this.stillStarting()) throw new Error('The nginx router was stopped while it was starting.');
      this.state = 'started';
      this.log.info({ driver: this.name, listen: this.opts.listen, nginxPid: this.master?.pid }, 'router: listening');
    } catch (err) {
      this.state = 'stopped';
      if (this.master?.child !== undefined) await this.kill(this.master);
      this.master = undefined;
      await this.responder?.stop();
      throw err;
    }
  }

  apply(table: RouteTable): Promise<void> {
    if (this.state !== 'started') return Promise.reject(new Error(`The nginx router is ${this.state}, not started: routes cannot be applied.`));
    this.wanted = table;
    this.applied = true;
    return this.switchSoon();
  }

  setCertificates(certificates: readonly TlsCertificate[]): Promise<void> {
    if (this.state !== 'started') return Promise.reject(new Error(`The nginx router is ${this.state}, not started: certificates cannot be applied.`));
    if (this.opts.tls === undefined) return Promise.reject(new Error('The nginx router has no TLS listener: certificates cannot be applied.'));
    try {
      // Checked here: a pair nginx refused would fail every later route change with it.
      this.certificates = checkCertificates(certificates);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    // Before the first apply() there are no routes of ours to serve them with, and a reload
    // would take an adopted nginx's routes away: they go out with the first table.
    if (!this.applied) return Promise.resolve();
    return this.switchSoon();
  }

  tlsAddress(): ListenAddress | undefined {
    return this.opts.tls?.listen;
  }

  /**
   * Puts a running project's next upstreams in the config ahead of the switch, behind a flag
   * file: the apply() that then routes the project to exactly them creates the flag, and every
   * worker proxies there from its next request on, without the reload's wait (nginx gives old
   * workers 100 ms before it retires them). The reload that drops the flag follows as usual.
   * Staging a project without upstreams in the live table, or with other hosts, does nothing;
   * `null` drops a stage (the next reload leaves it out).
   */
  stage(project: string, routes: ProjectRoutes | null): Promise<void> {
    if (this.state !== 'started') return Promise.reject(new Error(`The nginx router is ${this.state}, not started: routes cannot be staged.`));
    return this.serial(async () => {
      const live = this.live;
      const current = live?.project(project);
      this.stages.delete(project);
      if (routes === null || !this.canStage || live === undefined || current === undefined || current.upstreams.length === 0 || this.master === undefined) return;
      // validated and normalised as the table does it
      const next = live.setProject(project, routes).project(project);
      if (next === undefined || next.upstreams.length === 0 || !sameStrings(next.hosts, current.hosts) || sameUpstreams(next.upstreams, current.upstreams)) return;
      await mkdir(this.paths.flags, { recursive: true });
      await chmod(this.paths.flags, 0o755);
      const flag = join(this.paths.flags, this.nextGeneration());
      await rm(flag, { force: true });
      this.stages.set(project, { project, hosts: next.hosts, upstreams: next.upstreams, flag });
      try {
        await this.switchTo(live, this.certificates);
      } catch (err) {
        this.stages.delete(project);
        throw err;
      }
    });
  }

  /** Calls that arrive while a reload runs share the next one, which takes the latest table and certificates. */
  private switchSoon(): Promise<void> {
    this.batch ??= this.serial(async () => {
      this.batch = undefined;
      return this.switchTo(this.wanted, this.certificates);
    });
    return this.batch.then(({ drained }) => drained);
  }

  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'released') return;
    this.state = 'stopped';
    this.clearTimers();
    await this.queue.catch(() => undefined);
    const m = this.master;
    this.master = undefined;
    if (m !== undefined) await this.kill(m);
    await rm(this.paths.control, { force: true });
    await this.responder?.stop();
    this.log.info({ driver: this.name }, 'router: stopped');
  }

  /**
   * Stops supervising and leaves nginx serving its current routes, for a Slipway that hands
   * over to its next start (which adopts it). stop() is the usual way out.
   */
  release(): Promise<void> {
    if (this.state !== 'started') return Promise.resolve();
    this.state = 'released';
    this.clearTimers();
    this.master?.child?.unref();
    this.master = undefined;
    // nginx keeps serving; the challenge answers stop with Slipway until the next start applies.
    return this.queue.then(() => this.responder?.stop(), () => this.responder?.stop());
  }

  /** A method, so that TypeScript does not narrow `state` across the awaits of start(). */
  private stillStarting(): boolean {
    return this.state === 'starting';
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async switchTo(table: RouteTable, certificates: ReadonlyMap<string, CheckedCertificate>): Promise<{ drained: Promise<void> }> {
    const flipped = await this.flip(table);
    const stages = this.pendingStages(table);
    const files = await this.writeCertificates(table, certificates);
    const key = this.render(table, '', files, stages);
    if (key === this.runningKey && this.master !== undefined) {
      this.live = table;
      return { drained: Promise.resolve() };
    }
    const generation = this.nextGeneration();
    const text = this.render(table, generation, files, stages);
    try {
      await this.validate(text);
      await rename(this.paths.next, this.paths.conf);
    } catch (err) {
      await unflip(flipped);
      throw err;
    }
    try {
      let drained = Promise.resolve();
      if (this.master === undefined) await this.launch(generation);
      else ({ drained } = await this.reload(this.master, generation));
      this.runningKey = key;
      this.runningText = text;
      this.live = table;
      this.runningStages = new Map(stages.map((st) => [st.project, st]));
      this.log.info({ version: table.version, hosts: table.routes().length, tlsHosts: files.size, staged: stages.length }, 'router: routes applied');
      await this.removeStaleCertificates(files);
      // Flags of switched stages go once no worker of a config that names them takes requests.
      const referenced = new Set(stages.map((st) => st.flag));
      void drained.then(() => this.removeStaleFlags(referenced));
      return { drained };
    } catch (err) {
      // nginx kept its previous config; so does the file a restart would read, and the routes it switched.
      if (this.runningText !== undefined) await writeFile(this.paths.conf, this.runningText);
      await unflip(flipped);
      throw err;
    }
  }

  /** Switches the running config's stages that `table` routes to: their flag files appear. */
  private async flip(table: RouteTable): Promise<string[]> {
    if (this.master === undefined) return [];
    const flags: string[] = [];
    for (const st of this.runningStages.values()) {
      const next = table.project(st.project);
      if (next === undefined || !sameStrings(next.hosts, st.hosts) || !sameUpstreams(next.upstreams, st.upstreams)) continue;
      await writeFile(st.flag, '');
      flags.push(st.flag);
    }
    if (flags.length > 0) this.log.info({ version: table.version, switched: flags.length }, 'router: staged routes switched');
    return flags;
  }

  /** The stages still ahead of `table` (dropping those it routes to already, or that no longer fit it). */
  private pendingStages(table: RouteTable): Stage[] {
    const pending: Stage[] = [];
    for (const [project, st] of this.stages) {
      const routes = table.project(project);
      const fits = routes !== undefined && routes.upstreams.length > 0 && sameStrings(routes.hosts, st.hosts) && !sameUpstreams(routes.upstreams, st.upstreams);
      if (fits && !existsSync(st.flag)) pending.push(st);
      else this.stages.delete(project);
    }
    return pending;
  }

  private async removeStaleFlags(referenced: ReadonlySet<string>): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.paths.flags);
    } catch {
      return;
    }
    // The running config may have changed meanwhile: keep what it names too.
    const running = new Set([...this.runningStages.values()].map((st) => st.flag));
    for (const name of names) {
      const file = join(this.paths.flags, name);
      if (!referenced.has(file) && !running.has(file)) await rm(file, { force: true });
    }
  }

  /** SIGHUP, then wait until the new workers answer and the old ones have stopped taking requests. */
  private async reload(m: Master, generation: string): Promise<{ drained: Promise<void> }> {
    // Workers still shutting down from an earlier reload were waited for by that apply.
    const old = await filterAsync(await workerPids(m.pid), async (pid) => !(await isShuttingDown(pid)));
    await this.logs.rotate(() => { process.kill(m.pid, 'SIGUSR1'); });
    const errorsFrom = await this.logs.mark();
    process.kill(m.pid, 'SIGHUP');
    const deadline = Date.now() + (this.opts.reloadTimeoutMs ?? 15_000);
    for (;;) {
      if (this.master !== m) throw new Error(`nginx exited during a reload.${await this.reasonSince(errorsFrom)}`);
      const answered = await probe(this.paths.control).catch(() => undefined);
      if (answered === generation && (await everyAsync(old, async (pid) => !(await isAlive(pid)) || (await isShuttingDown(pid))))) {
        await this.narrowControl();
        break;
      }
      if (Date.now() > deadline) {
        throw new Error(`nginx did not take the new router config within ${this.opts.reloadTimeoutMs ?? 15_000} ms.${await this.reasonSince(errorsFrom)}`);
      }
      await sleep(10);
    }
    // A wrapper, not the promise itself: awaiting reload() must not wait for the drain.
    return { drained: waitUntil(() => everyAsync(old, async (pid) => !(await isAlive(pid))), this.opts.drainTimeoutMs ?? 10_000) };
  }

  /** Runs nginx on the config on disk and waits until it answers with `generation`. */
  private async launch(generation: string): Promise<void> {
    const binary = this.binary ?? 'nginx';
    await rm(this.paths.control, { force: true });
    // nginx is not running: its logs are renamed without telling it
    await this.logs.rotate(undefined);
    const stderrFrom = await this.logs.mark(this.paths.stderr);
    const errorsFrom = await this.logs.mark();
    const stderr = await open(this.paths.stderr, 'a');
    let child: ChildProcess;
    try {
      child = spawn(binary, ['-p', `${this.dir}/`, '-e', this.paths.errorLog, '-c', this.paths.conf], {
        detached: true,
        stdio: ['ignore', 'ignore', stderr.fd],
      });
    } finally {
      await stderr.close();
    }
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    if (child.pid === undefined) throw new Error(`nginx could not be started (${binary}): ${(await spawnError).message}`);
    const m: Master = { pid: child.pid, child, startedAt: Date.now() };
    this.master = m;
    child.once('exit', (code, signal) => { this.onExit(m, code === null ? `signal ${String(signal)}` : `code ${code}`); });
    const deadline = Date.now() + (this.opts.reloadTimeoutMs ?? 15_000);
    for (;;) {
      if (this.master !== m) {
        const reason = (await this.logs.since(stderrFrom, this.paths.stderr)).trim() || (await this.reasonSince(errorsFrom)).trim();
        throw new Error(`nginx exited at start: ${reason === '' ? 'no message' : reason}`);
      }
      if ((await probe(this.paths.control).catch(() => undefined)) === generation) {
        await this.narrowControl();
        break;
      }
      if (Date.now() > deadline) {
        await this.kill(m);
        throw new Error(`nginx did not answer within ${this.opts.reloadTimeoutMs ?? 15_000} ms of starting.${await this.reasonSince(errorsFrom)}`);
      }
      await sleep(20);
    }
    this.log.info({ nginxPid: m.pid }, 'router: nginx running');
  }

  private onExit(m: Master, how: string): void {
    if (this.master !== m) return;
    this.master = undefined;
    // Orphaned workers would keep the port and refuse the next master's bind.
    killGroup(m.pid, 'SIGKILL');
    if (this.state !== 'started') return;
    if (Date.now() - m.startedAt > 10_000) this.crashes = 0;
    const delay = Math.min(5_000, 100 * 2 ** this.crashes);
    this.crashes += 1;
    this.log.error({ nginxPid: m.pid, exit: how, restartInMs: delay }, 'router: nginx exited unexpectedly; restarting it');
    this.scheduleRestart(delay);
  }

  private scheduleRestart(delay: number): void {
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.serial(async () => {
        if (this.state !== 'started' || this.master !== undefined) return;
        const generation = this.nextGeneration();
        const text = this.runningText ?? this.render(RouteTable.empty(), generation);
        // The config on disk is the one last applied; only its probe answer changes.
        await writeFile(this.paths.conf, withGeneration(text, generation));
        this.runningText = withGeneration(text, generation);
        await this.launch(generation);
        this.log.info({ nginxPid: this.pid() }, 'router: nginx restarted');
      }).catch((err: unknown) => {
        if (this.state !== 'started') return;
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

  /** Graceful stop (SIGQUIT), then SIGKILL of the whole group when it takes too long. */
  private async kill(m: Master): Promise<void> {
    try {
      process.kill(m.pid, 'SIGQUIT');
    } catch {
      // already gone
    }
    const exited = () => m.child === undefined || m.child.exitCode !== null || m.child.signalCode !== null;
    const gone = await waitUntilTrue(async () => !(await isAlive(m.pid)) && exited(), this.opts.stopTimeoutMs ?? 5_000);
    if (!gone) this.log.warn({ nginxPid: m.pid }, 'router: nginx did not stop gracefully in time; killing it');
    killGroup(m.pid, 'SIGKILL');
    await waitUntilTrue(async () => !(await isAlive(m.pid)), 2_000);
  }

  private clearTimers(): void {
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    if (this.watchTimer !== undefined) clearInterval(this.watchTimer);
    this.restartTimer = undefined;
    this.watchTimer = undefined;
  }

  private nextGeneration(): string {
    this.counter += 1;
    return `${this.nonce}-${this.counter}`;
  }

  /**
   * nginx reads its own copies of the certificates of the hosts it serves, named by their
   * content: a renewed certificate is a new file name, hence a new config and a reload, and a
   * pair is never half-written under a name nginx may load (write, then rename).
   */
  private async writeCertificates(table: RouteTable, certificates: ReadonlyMap<string, CheckedCertificate>): Promise<Map<string, CertificateFiles>> {
    const files = new Map<string, CertificateFiles>();
    if (this.opts.tls === undefined) return files;
    for (const route of table.routes()) {
      const c = certificates.get(route.host);
      if (c === undefined) continue;
      if (files.size === 0) {
        await mkdir(this.paths.certs, { recursive: true, mode: 0o700 });
        await chmod(this.paths.certs, 0o700);
      }
      const base = join(this.paths.certs, `${c.host}.${c.digest}`);
      const pair = { certificate: `${base}.crt`, privateKey: `${base}.key` };
      if (!existsSync(pair.privateKey)) await writeAtomically(pair.privateKey, c.privateKeyPem, 0o600);
      if (!existsSync(pair.certificate)) await writeAtomically(pair.certificate, c.certificatePem, 0o644);
      files.set(c.host, pair);
    }
    return files;
  }

  /** The copies no running config refers to any more (a renewed or a removed host's). */
  private async removeStaleCertificates(live: ReadonlyMap<string, CertificateFiles>): Promise<void> {
    if (this.opts.tls === undefined) return;
    const keep = new Set([...live.values()].flatMap((f) => [f.certificate, f.privateKey]));
    let names: string[];
    try {
      names = await readdir(this.paths.certs);
    } catch {
      return;
    }
    for (const name of names) {
      const file = join(this.paths.certs, name);
      if (!keep.has(file)) await rm(file, { force: true });
    }
  }

  private render(table: RouteTable, generation: string, certificateFiles: ReadonlyMap<string, CertificateFiles> = new Map(), stages: readonly Stage[] = []): string {
    const staged = new Map<string, StagedUpstreams>(stages.flatMap((st) => st.hosts.map((host) => [host, { upstreams: st.upstreams, flag: st.flag }] as const)));
    return renderNginxConfig(table, {
      staged,
      listen: this.opts.listen,
      dir: this.dir,
      generation,
      workerProcesses: this.opts.workerProcesses ?? 'auto',
      connectTimeoutSec: this.opts.connectTimeoutSec ?? 5,
      idleTimeoutSec: this.opts.idleTimeoutSec ?? 3600,
      shutdownTimeoutSec: this.opts.shutdownTimeoutSec ?? 240,
      accessLog: this.opts.accessLog ?? true,
      scheme: this.opts.scheme ?? 'http',
      modules: this.modules,
      tls: this.opts.tls === undefined ? undefined : { listen: this.opts.tls.listen, files: certificateFiles },
      acmeResponder: this.responder?.address(),
    });
  }

  /** Writes the candidate next to the live config and has nginx check it. */
  private async validate(text: string): Promise<void> {
    await writeFile(this.paths.next, text);
    try {
      await execFileP(this.binary ?? 'nginx', ['-t', '-q', '-p', `${this.dir}/`, '-e', this.paths.errorLog, '-c', this.paths.next], { timeout: 20_000 });
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr ?? '';
      const detail = stderr.split('\n').find((l) => l.includes('[emerg]') || l.includes('[alert]') || l.includes('[crit]')) ?? (stderr.trim() || errorMessage(err));
      throw new Error(`nginx rejected the router config (kept the previous one): ${detail.replace(/^nginx: /, '')}`);
    }
  }

  /** Which optional modules this nginx has (their temp paths must be set, or it uses /var/lib/nginx). */
  private async inspect(binary: string): Promise<NginxConfigSettings['modules']> {
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

  private async prepareDir(): Promise<void> {
    for (const d of [this.dir, join(this.dir, 'logs'), this.paths.temp]) {
      await mkdir(d, { recursive: true });
      // Workers drop root privileges (to nobody) and must still reach their temp paths.
      await chmod(d, 0o755);
    }
    // Only the driver (this user) connects to the control socket: see nginxPaths().
    await mkdir(this.paths.controlDir, { recursive: true, mode: 0o700 });
    await chmod(this.paths.controlDir, 0o700);
  }

  /** nginx creates its unix listener 0666; the directory already keeps others out, this narrows the socket too. */
  private async narrowControl(): Promise<void> {
    await chmod(this.paths.control, 0o600).catch(() => undefined);
  }

  /** A master of ours still running (after a Slipway crash or release()), from the pid file. */
  private async findRunning(): Promise<{ pid: number } | undefined> {
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
    try {
      this.runningText = await readFile(this.paths.conf, 'utf8');
    } catch {
      return undefined;
    }
    return { pid };
  }

  /** The error lines nginx logged since `mark`, for a message. */
  private async reasonSince(mark: LogMark): Promise<string> {
    const lines = await this.logs.errorsSince(mark);
    return lines.length === 0 ? '' : ` nginx said: ${lines.slice(-3).join(' | ')}`;
  }
}

/** Written under a temporary name and renamed, with its mode from the start (keys are never world-readable). */
async function writeAtomically(file: string, text: string, mode: number): Promise<void> {
  const temp = `${file}.tmp`;
  await rm(temp, { force: true });
  await writeFile(temp, text, { mode });
  await rename(temp, file);
}

function withGeneration(text: string, generation: string): string {
  return text.replace(/(location = \/generation \{\s*default_type text\/plain;\s*return 200 ")[^"]*(";)/, `$1${generation}$2`);
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

async function waitUntilTrue(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

function waitUntil(check: () => Promise<boolean>, ms: number): Promise<void> {
  return waitUntilTrue(check, ms).then(() => undefined);
}

const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

async function unflip(flags: readonly string[]): Promise<void> {
  for (const f of flags) await rm(f, { force: true });
}

const sameStrings = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Whether nginx's workers can stat files in `dir`: a master run as root hands them to `nobody`,
 * who needs every parent directory open to others (o+x). Otherwise they run as this user.
 */
function workersReach(dir: string): boolean {
  if (process.getuid?.() !== 0) return true;
  for (let d = dir; ; d = dirname(d)) {
    try {
      if ((statSync(d).mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
    if (dirname(d) === d) return true;
  }
}
