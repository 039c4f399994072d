import { existsSync, statSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { systemClock, systemRandom, type Clock, type Random } from '../../domain/clock.js';
import type { AcmeChallenges } from './acme-challenges.js';
import { AcmeResponder } from './acme-responder.js';
import { NginxLogs } from './nginx.logs.js';
import { errorMessage, execFileP, findNginx, isExecutable, NginxMissingError, nginxModules, NginxProcess } from './nginx.process.js';
import { assertSafeDir, nginxPaths, renderNginxConfig, type CertificateFiles, type NginxConfigSettings, type StagedUpstreams } from './nginx.config.js';
import { RouteTable, sameUpstreams, type ProjectRoutes, type Upstream } from './route-table.js';
import { silentLog, type ListenAddress, type RouterDriver, type RouterLog, type TlsCertificate, type TlsOptions } from './router.js';
import { checkCertificates, type CheckedCertificate } from './tls-certificates.js';

export { findNginx, nginxBinary, NginxMissingError } from './nginx.process.js';

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
  /** default: the system clock */
  clock?: Clock;
}

/** A project's next upstreams, in the config ahead of its switch (stage()). */
interface Stage {
  readonly project: string;
  readonly hosts: readonly string[];
  readonly upstreams: readonly Upstream[];
  /** the file whose existence switches the project's hosts over */
  readonly flag: string;
}

/**
 * The production data plane: nginx run as a child process that Slipway supervises, with its
 * own directory (config, pid, logs, temp paths; never /etc/nginx). A route change is one
 * config transaction: render nginx.conf, write it next to the live one, have `nginx -t`
 * validate it, swap it in and reload gracefully (the old workers finish what they started, new
 * connections go to the new workers, nothing is refused); a failure at any step rolls back to
 * the previous config. Applies run one at a time and bursts are coalesced into one reload.
 *
 * The nginx process itself (spawn, adoption, signals, restarts, the wait for its workers) is
 * NginxProcess's (nginx.process.ts): nginx runs in its own process group, so it outlives a
 * Slipway that is killed, and the next Slipway adopts it and the apps keep being served.
 */
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
  private readonly nginx: NginxProcess;
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

  constructor(opts: NginxDriverOptions) {
    this.opts = opts;
    this.dir = resolve(opts.dir);
    assertSafeDir(this.dir);
    this.paths = nginxPaths(this.dir);
    this.binary = opts.binary;
    this.log = opts.log ?? silentLog;
    this.random = opts.random ?? systemRandom;
    this.nonce = this.random.bytes(4).toString('hex');
    this.nginx = new NginxProcess({
      dir: this.dir,
      paths: this.paths,
      logs: new NginxLogs(this.paths.errorLog, [this.paths.accessLog], opts.logRotateBytes, [this.paths.stderr]),
      clock: opts.clock ?? systemClock,
      log: this.log,
      reloadTimeoutMs: opts.reloadTimeoutMs ?? 15_000,
      stopTimeoutMs: opts.stopTimeoutMs ?? 5_000,
      drainTimeoutMs: opts.drainTimeoutMs ?? 10_000,
      supervised: () => this.state === 'started',
      restart: () => this.restartNginx(),
    });
  }

  /** true when start() found an nginx of a previous Slipway still running and took it over */
  get adopted(): boolean {
    return this.nginx.adopted;
  }

  /** nginx's directory, absolute */
  get directory(): string {
    return this.dir;
  }

  /** the nginx master's pid while it runs */
  pid(): number | undefined {
    return this.nginx.pid;
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
      this.modules = await nginxModules(this.binary);
      await this.prepareDir();
      if (this.opts.challenges !== undefined) {
        this.responder = new AcmeResponder(this.opts.challenges);
        await this.responder.start();
      }
      this.canStage = workersReach(this.dir);
      if (!this.canStage) {
        this.log.warn({ dir: this.dir }, 'router: nginx workers (user nobody) cannot reach the router directory, a parent being closed to others; switches wait for a full reload (chmod o+x the parents to switch sooner)');
      }
      const running = await this.nginx.findRunning();
      // An nginx of ours is adopted with the config it runs, as the previous rollback point.
      const runningText = running === undefined ? undefined : await readFile(this.paths.conf, 'utf8').catch(() => undefined);
      if (running !== undefined && runningText !== undefined) {
        this.runningText = runningText;
        this.nginx.adopt(running);
        this.log.info({ nginxPid: running, dir: this.dir }, 'router: adopted the nginx left running by a previous Slipway');
      } else {
        const generation = this.nextGeneration();
        const text = this.render(RouteTable.empty(), generation);
        await this.validate(text);
        await rename(this.paths.next, this.paths.conf);
        await this.nginx.launch(this.binary, generation);
        this.runningText = text;
        this.runningKey = this.render(RouteTable.empty(), '');
      }
      // stop() may have been called while nginx was starting.
      if (!this.stillStarting()) throw new Error('The nginx router was stopped while it was starting.');
      this.state = 'started';
      this.log.info({ driver: this.name, listen: this.opts.listen, nginxPid: this.nginx.pid }, 'router: listening');
    } catch (err) {
      this.state = 'stopped';
      await this.nginx.discard();
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
      if (routes === null || !this.canStage || live === undefined || current === undefined || current.upstreams.length === 0 || !this.nginx.running) return;
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
    this.nginx.unsupervise();
    await this.queue.catch(() => undefined);
    await this.nginx.stop();
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
    this.nginx.release();
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
    if (key === this.runningKey && this.nginx.running) {
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
      if (!this.nginx.running) await this.nginx.launch(this.binary ?? 'nginx', generation);
      else ({ drained } = await this.nginx.reload(generation));
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
    if (!this.nginx.running) return [];
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

  /** After nginx exited unexpectedly (NginxProcess restarts it): the config last applied runs again. */
  private restartNginx(): Promise<void> {
    return this.serial(async () => {
      if (this.state !== 'started' || this.nginx.running) return;
      const generation = this.nextGeneration();
      const text = this.runningText ?? this.render(RouteTable.empty(), generation);
      // The config on disk is the one last applied; only its probe answer changes.
      await writeFile(this.paths.conf, withGeneration(text, generation));
      this.runningText = withGeneration(text, generation);
      await this.nginx.launch(this.binary ?? 'nginx', generation);
      this.log.info({ nginxPid: this.pid() }, 'router: nginx restarted');
    });
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
