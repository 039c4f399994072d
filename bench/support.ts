// Shared by the benchmarks that run the built `bin/slipway serve` against the local Docker Engine
// (bench/deploy.bench.ts, bench/idle-memory.bench.ts): the tiny app, the process, the API, the
// router, /proc memory readings and the clean-up. Not part of the test suite.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import pg from 'pg';
import { assertBuilt, BIN, freePort, slipwayEnv } from '../test/factories/process.js';

export { freePort };
export const execFileP = promisify(execFile);
export const sleep = (ms: number): Promise<void> => new Promise((r) => { setTimeout(r, ms); });

/** The tiny app: the local busybox base, one page, `busybox httpd` on $PORT. */
export const tinyApp = (base: string, text: string): Record<string, string> => ({
  Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
  'index.html': `${text}\n`,
});

// ---------------------------------------------------------------------------------------------
// numbers

export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  // nearest rank: with 5 values, p50 is the 3rd and p90 the 5th
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1] ?? Number.NaN;
}

export const round = (n: number, digits = 1): number => Math.round(n * 10 ** digits) / 10 ** digits;

export function summary(values: readonly number[], digits = 1): { median: number; p90: number; min: number; max: number } {
  return {
    median: round(quantile(values, 0.5), digits),
    p90: round(quantile(values, 0.9), digits),
    min: round(Math.min(...values), digits),
    max: round(Math.max(...values), digits),
  };
}

export async function machine(): Promise<Record<string, unknown>> {
  const version = async (cmd: string, args: string[]): Promise<string> => {
    try {
      const r = await execFileP(cmd, args);
      return `${r.stdout}${r.stderr}`.trim().split('\n')[0] ?? '';
    } catch {
      return 'unknown';
    }
  };
  return {
    cpus: cpus().length,
    cpu: cpus()[0]?.model ?? '',
    node: process.version,
    docker_engine: await version('docker', ['version', '--format', '{{.Server.Version}} (API {{.Server.APIVersion}})']),
    nginx: await version('/usr/sbin/nginx', ['-v']),
    git: await version('git', ['--version']),
  };
}

/** bench/results/<name>-<date>.json */
export function writeResult(name: string, report: { date: string }): string {
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}-${report.date.slice(0, 10)}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}

// ---------------------------------------------------------------------------------------------
// wrk (Debian package `wrk`)

export interface Measure {
  target: string;
  requestsPerSec: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  non2xx: number;
  socketErrors: number;
  /** CPU time the server process (`WrkOptions.pid`) spent per request in the measured run, µs */
  cpuUsPerRequest?: { user: number; system: number };
}

const toMs = (v: string): number => {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(v);
  if (m === null) return Number.NaN;
  const n = Number(m[1]);
  const unit = m[2] ?? 'ms';
  return unit === 'us' ? n / 1000 : unit === 'ms' ? n : unit === 's' ? n * 1000 : n * 60_000;
};

export interface WrkOptions {
  duration: number;
  connections: number;
  threads: number;
  headers?: Record<string, string>;
  /** seconds of load before the measured run: keep-alive pools, JIT, caches */
  warmup?: number;
  /** the server's process: its CPU time per request is reported (Measure.cpuUsPerRequest) */
  pid?: number;
}

/** One wrk run against `url` after a warm-up, read from wrk's own report (`--latency`). */
export async function wrk(target: string, url: string, o: WrkOptions): Promise<Measure> {
  const common = ['-t', String(o.threads), '-c', String(o.connections), ...Object.entries(o.headers ?? {}).flatMap(([k, v]) => ['-H', `${k}: ${v}`])];
  await execFileP('wrk', [...common, '-d', `${String(o.warmup ?? 2)}s`, url]);
  const before = o.pid === undefined ? undefined : cpuTimes(o.pid);
  const { stdout } = await execFileP('wrk', [...common, '-d', `${String(o.duration)}s`, '--latency', url], { maxBuffer: 1 << 20 });
  const after = o.pid === undefined ? undefined : cpuTimes(o.pid);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
  const p50 = toMs(/\n\s+50%\s+(\S+)/.exec(stdout)?.[1] ?? '');
  const p99 = toMs(/\n\s+99%\s+(\S+)/.exec(stdout)?.[1] ?? '');
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(stdout)?.[1] ?? 0);
  const se = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  const socketErrors = se === null ? 0 : [se[1], se[2], se[3], se[4]].reduce((a, b) => a + Number(b), 0);
  const requests = Number(/(\d+) requests in/.exec(stdout)?.[1]);
  const perRequest = (seconds: number) => round((seconds * 1e6) / requests, 1);
  const cpu = before === undefined || after === undefined ? {} : { cpuUsPerRequest: { user: perRequest(after.user - before.user), system: perRequest(after.system - before.system) } };
  return { target, requestsPerSec: Math.round(rps), latencyP50Ms: p50, latencyP99Ms: p99, non2xx, socketErrors, ...cpu };
}

/** Fails early with the package to install when wrk is missing. */
export async function assertWrk(): Promise<void> {
  try {
    await execFileP('wrk', ['--version']).catch((err: unknown) => {
      // wrk --version exits 1 after printing its version
      if ((err as { code?: unknown }).code === 'ENOENT') throw err;
    });
  } catch {
    throw new Error('wrk is not installed: apt-get install wrk');
  }
}

// ---------------------------------------------------------------------------------------------
// /proc

/** A field of /proc/<pid>/status in KiB (VmRSS, VmHWM …); NaN when the process is gone. */
export function procStatusKiB(pid: number, field: string): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
    return m === null ? Number.NaN : Number(m[1]);
  } catch {
    return Number.NaN;
  }
}

/** Proportional set size from /proc/<pid>/smaps_rollup (shared pages split between their users), KiB. */
export function pssKiB(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${String(pid)}/smaps_rollup`, 'utf8'));
    return m === null ? Number.NaN : Number(m[1]);
  } catch {
    return Number.NaN;
  }
}

export const mib = (kib: number): number => round(kib / 1024, 1);

/** The user and system CPU time a process has spent, in seconds (/proc/<pid>/stat, 100 ticks a second). */
export function cpuTimes(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}

function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function childrenOf(parent: number): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) pids.push(Number(name));
    } catch {
      // exited while listing
    }
  }
  return pids;
}

// ---------------------------------------------------------------------------------------------
// Slipway

/** An API answer: the envelope's `data`, undefined when the body was not JSON or had none. */
export interface Answer<T> {
  status: number;
  data: T | undefined;
  text: string;
}

export interface Serve {
  pid: number;
  api: string;
  key: string;
  routerPort: number;
  dataDir: string;
  appsDomain: string;
  /** pino lines of stdout, parsed, with the time they arrived */
  logs: { at: number; line: Record<string, unknown> }[];
  stderr(): string;
  /** the nginx master and its workers, from the router's pid file */
  nginxPids(): number[];
  request<T = unknown>(method: string, path: string, body?: unknown): Promise<Answer<T>>;
  /** the store's instance id (meta table): every container and image Slipway makes carries it */
  instanceId(): string;
  /** the operator's metrics listener (`http://host:port`), as the server logged it */
  metricsUrl(): string | undefined;
  /** SIGTERM (graceful: stops nginx too), SIGKILL after 20 s; then no nginx of ours is left either */
  stop(): Promise<void>;
}

/** The node options of bin/slipway's `#!/usr/bin/env -S node …` line: the server runs as it does when executed. */
export function launcherFlags(): string[] {
  const first = readFileSync(BIN, 'utf8').split('\n', 1)[0] ?? '';
  const m = /^#!\/usr\/bin\/env -S node(.*)$/.exec(first);
  return (m?.[1] ?? '').split(' ').filter((a) => a !== '');
}

/**
 * `bin/slipway serve` on free loopback ports, a temp data dir, Docker Engine and the nginx router,
 * cloning from `gitBaseUrl`. Resolves once /healthz answers and the bootstrap key is written.
 */
export async function startServe(
  gitBaseUrl: string,
  extra: string[] = [],
  opts: {
    stdoutFile?: string;
    /** a restart: the data dir and ports of an earlier (stopped) start */
    again?: Pick<Serve, 'dataDir' | 'api' | 'routerPort'>;
    /** options for the server's node (besides SLIPWAY_BENCH_NODE_ARGS) */
    nodeArgs?: string[];
  } = {},
): Promise<Serve> {
  assertBuilt();
  // short: the nginx control socket path must stay under 100 bytes
  const dataDir = opts.again?.dataDir ?? mkdtempSync(join(tmpdir(), 'swb-'));
  // open like a default install's ./data (mkdir, 0755), so that nginx's workers reach the router directory
  chmodSync(dataDir, 0o755);
  const apiPort = opts.again === undefined ? await freePort() : Number(new URL(opts.again.api).port);
  const routerPort = opts.again?.routerPort ?? (await freePort());
  const appsDomain = 'apps.bench';
  const args = [
    BIN,
    'serve',
    '--listen', `127.0.0.1:${String(apiPort)}`,
    '--router-listen', `127.0.0.1:${String(routerPort)}`,
    '--data-dir', dataDir,
    '--git-base-url', gitBaseUrl,
    '--engine', 'docker',
    '--router', 'nginx',
    '--apps-domain', appsDomain,
    ...extra,
  ];
  // stdoutFile: the log goes to a file, unread (a load test would otherwise spend this process's CPU parsing it)
  const out = opts.stdoutFile === undefined ? 'pipe' : openSync(opts.stdoutFile, 'w');
  // SLIPWAY_BENCH_NODE_ARGS: options for the server's node, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" for a CPU profile of the run
  const nodeArgs = [...launcherFlags(), ...(opts.nodeArgs ?? []), ...(process.env['SLIPWAY_BENCH_NODE_ARGS'] ?? '').split(' ').filter((a) => a !== '')];
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, ...args], { env: slipwayEnv({ SLIPWAY_ENGINE: 'docker' }), stdio: ['ignore', out, 'pipe'] });
  if (typeof out === 'number') closeSync(out);
  const pid = child.pid;
  if (pid === undefined) throw new Error('bin/slipway could not be started');
  const logs: Serve['logs'] = [];
  let pending = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    const at = performance.now();
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const l of lines) {
      if (!l.startsWith('{')) continue;
      try {
        logs.push({ at, line: JSON.parse(l) as Record<string, unknown> });
      } catch {
        // not a log line
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const exited = new Promise<void>((resolve) => child.once('exit', () => { resolve(); }));
  const state = { gone: false };
  void exited.then(() => { state.gone = true; });

  const api = `http://127.0.0.1:${String(apiPort)}`;
  const routerDir = join(dataDir, 'router');
  const nginxMaster = (): number | undefined => {
    try {
      const n = Number.parseInt(readFileSync(join(routerDir, 'nginx.pid'), 'utf8').trim(), 10);
      return Number.isInteger(n) && n > 1 && isAlive(n) ? n : undefined;
    } catch {
      return undefined;
    }
  };
  const serve: Serve = {
    pid,
    api,
    key: '',
    routerPort,
    dataDir,
    appsDomain,
    logs,
    stderr: () => stderr,
    nginxPids: () => {
      const master = nginxMaster();
      return master === undefined ? [] : [master, ...childrenOf(master)];
    },
    request: async <T = unknown>(method: string, path: string, body?: unknown): Promise<Answer<T>> => {
      const res = await fetch(`${api}${path}`, {
        method,
        headers: { 'x-api-key': serve.key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      let data: T | undefined;
      try {
        data = (JSON.parse(text) as { data?: T }).data;
      } catch {
        data = undefined;
      }
      return { status: res.status, data, text };
    },
    metricsUrl: () => {
      const line = logs.find((l) => typeof l.line['msg'] === 'string' && l.line['msg'].startsWith('metrics for the operator'));
      return typeof line?.line['url'] === 'string' ? line.line['url'] : undefined;
    },
    instanceId: () => {
      const db = new Database(join(dataDir, 'slipway.db'), { readonly: true, fileMustExist: true });
      try {
        const row = db.prepare("SELECT value FROM meta WHERE key = 'instance_id'").get() as { value: string } | undefined;
        if (row === undefined) throw new Error('the store has no instance id');
        return row.value;
      } finally {
        db.close();
      }
    },
    stop: async () => {
      const master = nginxMaster();
      if (!state.gone) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => { child.kill('SIGKILL'); }, 20_000);
        await exited;
        clearTimeout(timer);
      }
      // nginx runs in its own process group: a Slipway that did not stop it (killed) leaves it serving.
      if (master !== undefined && isAlive(master)) {
        try {
          process.kill(-master, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
    },
  };
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (state.gone) throw new Error(`slipway serve exited at start:\n${stderr}`);
      const ok = await fetch(`${api}/healthz`).then((r) => r.status === 200, () => false);
      if (ok && existsSync(join(dataDir, 'bootstrap-key'))) break;
      if (Date.now() > deadline) throw new Error(`slipway serve did not become healthy within 60 s:\n${stderr}`);
      await sleep(50);
    }
    serve.key = readFileSync(join(dataDir, 'bootstrap-key'), 'utf8').trim();
  } catch (err) {
    await serve.stop();
    if (opts.again === undefined) rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return serve;
}

/** GET / through the router with a Host header, on a fresh connection. */
export function viaRouter(port: number, host: string, timeoutMs = 2000): Promise<{ status: number; body: string }> {
  return httpGet(port, host, timeoutMs);
}

/** GET / on 127.0.0.1:port; status 0 when the connection fails. */
export function httpGet(port: number, host = '127.0.0.1', timeoutMs = 2000): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }); });
      res.on('error', () => { resolve({ status: 0, body: '' }); });
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => { resolve({ status: 0, body: '' }); });
    req.end();
  });
}

/** Polls `check` every `everyMs` until it is true; the time it first was, from performance.now(). */
export async function pollUntil(what: string, check: () => Promise<boolean>, everyMs: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return performance.now();
    if (performance.now() > deadline) throw new Error(`timed out after ${String(timeoutMs)} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

// ---------------------------------------------------------------------------------------------
// clean-up, with the docker CLI (argument arrays only)

async function dockerIds(args: string[]): Promise<string[]> {
  const { stdout } = await execFileP('docker', args);
  return stdout.split('\n').map((s) => s.trim()).filter((s) => s !== '');
}

/** Removes every container, network and image carrying one of the labels (`key=value`). */
export async function purgeByLabels(labels: readonly string[]): Promise<{ containers: number; networks: number; images: number; volumes: number }> {
  const out = { containers: 0, networks: 0, images: 0, volumes: 0 };
  for (const label of labels) {
    const containers = await dockerIds(['ps', '-aq', '--no-trunc', '--filter', `label=${label}`]);
    if (containers.length > 0) {
      await execFileP('docker', ['rm', '-f', '-v', ...containers]).catch(() => undefined);
      out.containers += containers.length;
    }
  }
  for (const label of labels) {
    for (const n of await dockerIds(['network', 'ls', '-q', '--filter', `label=${label}`])) {
      if (await execFileP('docker', ['network', 'rm', n]).then(() => true, () => false)) out.networks++;
    }
  }
  // databases' and template instances' data
  for (const label of labels) {
    for (const v of await dockerIds(['volume', 'ls', '-q', '--filter', `label=${label}`])) {
      if (await execFileP('docker', ['volume', 'rm', v]).then(() => true, () => false)) out.volumes++;
    }
  }
  // children before parents, in a few passes
  for (let pass = 0; pass < 5; pass++) {
    let left = 0;
    for (const label of labels) {
      const images = await dockerIds(['images', '-aq', '--no-trunc', '--filter', `label=${label}`]);
      left += images.length;
      for (const image of [...new Set(images)]) {
        if (await execFileP('docker', ['rmi', '-f', image]).then(() => true, () => false)) out.images++;
      }
    }
    if (left === 0) break;
  }
  return out;
}

/** A scratch PostgreSQL database on the server of `base` (an admin URL), and how to drop it. */
export async function freshPostgres(base: string, prefix = 'slipway_bench'): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** The value after `--name` on the command line, or `fallback`. */
export function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : (process.argv[i + 1] ?? fallback);
}

/** A number after `--name`, or `fallback` when absent or not a number. */
export const num = (name: string, fallback: number): number => {
  const v = Number(arg(name, String(fallback)));
  return Number.isFinite(v) ? v : fallback;
};
