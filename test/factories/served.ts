// The test server as a process: the built `slipway serve` started the way a user starts it
// (startServed), for the tests that need what only the real program does (bootstrap, signals,
// flags and variables, the leader's engine, crashes). The in-process server of the same API is
// startTestServer (harness.ts); docs/testing.md#fixture says which to use. Also: the API called
// with the bootstrap key, the router probed by Host header, the installation's engine objects
// removed afterwards.
import { existsSync, mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import { createStore, instanceId } from '../../src/store/db.js';
import { freePort, startSlipway, waitFor, waitHealthy, type Exit, type SlipwayProcess } from './process.js';
import type { TestDatabase } from './stores.js';

export interface ServeOptions {
  /** the store: SQLite in its directory, or its PostgreSQL database (`--database-url`); its directory is the data directory */
  database?: TestDatabase;
  /** the data directory (`--data-dir`); default the database's directory, else a fresh temporary one */
  dataDir?: string;
  /** the API's port on 127.0.0.1 (`--listen`); default a free one */
  port?: number;
  /** `docker`: the leader's engine on Docker (SLIPWAY_ENGINE=docker); default none (the control plane only) */
  engine?: 'docker';
  /** any other flag, after these */
  args?: readonly string[];
  /** variables for the process (a SLIPWAY_* one is a setting) */
  env?: Record<string, string>;
}

export interface Served {
  proc: SlipwayProcess;
  /** the API's base URL, http://127.0.0.1:port */
  api: string;
  port: number;
  dataDir: string;
  /** the bootstrap key this start printed on stdout (a first start prints one) */
  bootstrapKey(): Promise<string>;
  /** signals the process (default SIGTERM) and waits for its exit */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

const BOOTSTRAP_KEY = /svc_sk_[0-9a-f]{40}/;

/** The flags `startServed` passes for `o`, before `o.args`. */
export function serveArgs(o: Pick<ServeOptions, 'database' | 'dataDir'> & { port: number }): string[] {
  const dataDir = o.dataDir ?? o.database?.dir;
  return [
    'serve',
    '--listen', `127.0.0.1:${o.port.toString()}`,
    ...(dataDir === undefined ? [] : ['--data-dir', dataDir]),
    ...(o.database?.kind === 'postgres' ? ['--database-url', o.database.url] : []),
  ];
}

/** `bin/slipway serve` on a free loopback port, answering /healthz; killed by killAll() (process.ts). */
export async function startServed(o: ServeOptions = {}): Promise<Served> {
  const port = o.port ?? (await freePort());
  const dataDir = o.dataDir ?? o.database?.dir ?? mkdtempSync(join(tmpdir(), 'slipway-serve-'));
  const env = { ...(o.engine === 'docker' ? { SLIPWAY_ENGINE: 'docker' } : {}), ...o.env };
  const proc = startSlipway([...serveArgs({ ...o, port, dataDir }), ...(o.args ?? [])], env);
  const api = `http://127.0.0.1:${port.toString()}`;
  await waitHealthy(proc, api);
  return {
    proc,
    api,
    port,
    dataDir,
    bootstrapKey: () => waitFor('the bootstrap key on stdout', () => BOOTSTRAP_KEY.exec(proc.stdout())?.[0], proc),
    stop: (signal = 'SIGTERM') => proc.stop(signal),
  };
}

export interface Envelope<T> {
  success?: boolean;
  data?: T;
  error?: string;
}

/** `call(method, path, body?)` against `api` with the key `key()` gives at call time. */
export function apiClient(api: () => string, key: () => string) {
  return async function call<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: Envelope<T> }> {
    const headers: Record<string, string> = { 'x-api-key': key() };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(api() + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, body: (await res.json()) as Envelope<T> };
  };
}

/** GET / through the router with a Host header, on a fresh connection; status 0 when the connection fails. */
export function probeRouter(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err) => {
      resolve({ status: 0, body: err.message });
    });
    req.end();
  });
}

/**
 * Calls `probe` one call after another, `everyMs` apart, until `during` settles (either way);
 * then resolves with every answer, or rejects as `during` did.
 */
export async function probeDuring<T, R>(probe: () => Promise<T>, everyMs: number, during: () => Promise<R>): Promise<{ answers: T[]; result: R }> {
  const answers: T[] = [];
  const probing = { on: true };
  const prober = (async () => {
    while (probing.on) {
      answers.push(await probe());
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  try {
    return { answers, result: await during() };
  } finally {
    probing.on = false;
    await prober;
  }
}

/**
 * Removes what the installation in `dataDir` (SQLite, or the PostgreSQL store at `databaseUrl`)
 * made on the engine: everything labelled with its instance id, and its `ws-default` network
 * (which carries the workspace's id).
 */
export async function purgeInstallation(dataDir: string, databaseUrl?: string): Promise<void> {
  const file = join(dataDir, 'slipway.db');
  if (databaseUrl === undefined && !existsSync(file)) return;
  const store = await createStore(databaseUrl ?? file);
  const id = await instanceId(store);
  const workspace = await store.db.selectFrom('workspaces').select('id').where('slug', '=', 'default').executeTakeFirst();
  await store.close();
  const docker = new Docker();
  await new DockerRuntime({ docker }).purge({ labels: { 'slipway.instance': id } });
  if (workspace === undefined) return;
  for (const n of await docker.listNetworks({ filters: { name: ['ws-default'], label: [`slipway.workspace=${workspace.id}`] } })) {
    await docker.getNetwork(n.Id).remove().catch(() => undefined);
  }
}
