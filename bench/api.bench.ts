// The API's authenticated hot path, in one run: `GET /api/workspaces/:slug/projects/:project_slug`
// served by the built `bin/slipway serve`, and by a minimal Fastify handler doing the same key-hash
// lookup and project read straight on the driver (better-sqlite3, or pg), each on SQLite and on
// PostgreSQL. Load comes from `wrk` (Debian package `wrk`).
//
//   npx tsx bench/api.bench.ts [--duration 10] [--connections 64] [--threads 2] [--rounds 1]
//                              [--stores sqlite,postgres] [--pg-url postgres://…]
//
// Slipway runs as installed, with its defaults (request log at info, to a file here), except for
// the per-key rate limit, raised so that wrk measures the path and not the 429. Writes
// bench/results/api-<date>.json and prints a table, with each server's CPU time per request in the
// measured run (user and system, from /proc): the p99 at 64 connections follows it
// (docs/decisions.md#hot-path). Not part of the test suite.
import { createHash } from 'node:crypto';
import { fork, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import pg from 'pg';
import { arg, assertWrk, freshPostgres, machine, num, startServe, wrk, writeResult, type Measure, type Serve } from './support.js';

const SELF = fileURLToPath(import.meta.url);
type StoreKind = 'sqlite' | 'postgres';


// ---------------------------------------------------------------------------------------------
// The reference: what a developer would write for this one route, in its own process.

interface KeyRow { id: string; user_id: string; revoked_at: string | null; expires_at: string }

async function runReference(store: StoreKind, where: string): Promise<void> {
  let findKey: (digest: string) => Promise<KeyRow | undefined>;
  let findProject: (workspace: string, project: string) => Promise<Record<string, unknown> | undefined>;
  const keySql = 'SELECT k.id, k.user_id, k.revoked_at, k.expires_at FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = ';
  const projectSql = 'SELECT p.* FROM projects p JOIN workspaces w ON w.id = p.workspace_id WHERE w.slug = ';
  if (store === 'sqlite') {
    const db = new Database(where);
    db.pragma('journal_mode = WAL');
    const key = db.prepare(`${keySql}?`);
    const project = db.prepare(`${projectSql}? AND p.slug = ?`);
    findKey = (digest) => Promise.resolve(key.get(digest) as KeyRow | undefined);
    findProject = (w, p) => Promise.resolve(project.get(w, p) as Record<string, unknown> | undefined);
  } else {
    const pool = new pg.Pool({ connectionString: where, max: 10 });
    findKey = async (digest) => (await pool.query<KeyRow>(`${keySql}$1`, [digest])).rows[0];
    findProject = async (w, p) => (await pool.query<Record<string, unknown>>(`${projectSql}$1 AND p.slug = $2`, [w, p])).rows[0];
  }
  const app = Fastify();
  app.get<{ Params: { slug: string; project: string } }>('/api/workspaces/:slug/projects/:project', async (request, reply) => {
    const presented = request.headers['x-api-key'];
    const key = typeof presented === 'string' ? await findKey(createHash('sha256').update(presented).digest('hex')) : undefined;
    if (key === undefined || key.revoked_at !== null) return reply.code(401).send({ error: { code: 'UNAUTHORIZED' } });
    const project = await findProject(request.params.slug, request.params.project);
    if (project === undefined) return reply.code(404).send({ error: { code: 'NOT_FOUND' } });
    return { data: project };
  });
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  process.send?.({ port: Number(new URL(address).port) });
}

function startReference(store: StoreKind, where: string): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(SELF, ['--role', 'reference', '--store', store, '--where', where], { stdio: 'inherit' });
  return new Promise((resolve, reject) => {
    child.once('message', (m: { port: number }) => { resolve({ child, port: m.port }); });
    child.once('exit', (code) => { reject(new Error(`the reference server exited (${String(code)})`)); });
  });
}

// ---------------------------------------------------------------------------------------------


interface StoreResult { store: StoreKind; rounds: { reference: Measure; slipway: Measure }[] }

async function benchStore(store: StoreKind, o: { duration: number; connections: number; threads: number; rounds: number; pgUrl: string }): Promise<StoreResult> {
  const pgDb = store === 'postgres' ? await freshPostgres(o.pgUrl) : undefined;
  let serve: Serve | undefined;
  let reference: ChildProcess | undefined;
  try {
    serve = await startServe('file:///nonexistent', [
      '--rate-limit', '1000000', '--rate-limit-burst', '1000000',
      ...(pgDb === undefined ? [] : ['--database-url', pgDb.url]),
    ], { stdoutFile: join(tmpdir(), `slipway-api-bench-${store}.log`) });
    const workspaces = await serve.request<{ slug: string }[]>('GET', '/api/workspaces');
    const slug = workspaces.data?.[0]?.slug;
    if (slug === undefined) throw new Error(`no workspace: ${workspaces.text}`);
    const created = await serve.request<{ slug: string }>('POST', `/api/workspaces/${slug}/projects`, { name: 'bench' });
    if (created.status !== 201 || created.data === undefined) throw new Error(`project not created: ${created.text}`);
    const path = `/api/workspaces/${slug}/projects/${created.data.slug}`;
    const ref = await startReference(store, pgDb?.url ?? join(serve.dataDir, 'slipway.db'));
    reference = ref.child;
    const check = await fetch(`http://127.0.0.1:${String(ref.port)}${path}`, { headers: { 'x-api-key': serve.key } });
    if (check.status !== 200) throw new Error(`the reference answers ${String(check.status)}`);

    const w = { duration: o.duration, connections: o.connections, threads: o.threads, headers: { 'X-API-Key': serve.key } };
    const rounds: StoreResult['rounds'] = [];
    for (let i = 0; i < o.rounds; i++) {
      const r = await wrk(`reference (${store})`, `http://127.0.0.1:${String(ref.port)}${path}`, { ...w, ...(ref.child.pid === undefined ? {} : { pid: ref.child.pid }) });
      print(r);
      const s = await wrk(`slipway (${store})`, `${serve.api}${path}`, { ...w, pid: serve.pid });
      print(s);
      rounds.push({ reference: r, slipway: s });
    }
    return { store, rounds };
  } finally {
    reference?.kill();
    if (serve !== undefined) {
      await serve.stop();
      rmSync(serve.dataDir, { recursive: true, force: true });
    }
    await pgDb?.drop();
  }
}

function print(m: Measure): void {
  const errors = m.non2xx + m.socketErrors > 0 ? `  (non-2xx ${String(m.non2xx)}, socket errors ${String(m.socketErrors)})` : '';
  const cpu = m.cpuUsPerRequest === undefined ? '' : `  CPU/request ${m.cpuUsPerRequest.user.toFixed(1)} µs user + ${m.cpuUsPerRequest.system.toFixed(1)} µs system`;
  console.log(`${m.target.padEnd(22)} ${String(m.requestsPerSec).padStart(8)} req/s  p50 ${m.latencyP50Ms.toFixed(2)} ms  p99 ${m.latencyP99Ms.toFixed(2)} ms${cpu}${errors}`);
}

const GOALS = { sqlite: { ratio: 0.5, p99Ms: 10 }, postgres: { ratio: 0.25, p99Ms: Number.POSITIVE_INFINITY } } as const;

async function main(): Promise<void> {
  await assertWrk();
  const o = {
    duration: num('duration', 10),
    connections: num('connections', 64),
    threads: num('threads', 2),
    rounds: num('rounds', 1),
    pgUrl: arg('pg-url', process.env['SLIPWAY_TEST_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres'),
  };
  const stores = arg('stores', 'sqlite,postgres').split(',') as StoreKind[];
  console.log(`wrk -t${String(o.threads)} -c${String(o.connections)} -d${String(o.duration)}s, ${String(o.rounds)} round(s) per store`);
  const results: StoreResult[] = [];
  for (const store of stores) results.push(await benchStore(store, o));

  const verdicts = results.map(({ store, rounds }) => {
    // the best round of each side: a background hiccup should not decide
    const best = (side: 'reference' | 'slipway') => rounds.map((r) => r[side]).sort((a, b) => b.requestsPerSec - a.requestsPerSec)[0];
    const ref = best('reference');
    const slip = best('slipway');
    const ratio = ref === undefined || slip === undefined ? Number.NaN : Math.round((slip.requestsPerSec / ref.requestsPerSec) * 1000) / 1000;
    const goal = GOALS[store];
    const p99 = slip?.latencyP99Ms ?? Number.NaN;
    const errors = rounds.some((r) => r.slipway.non2xx + r.slipway.socketErrors > 0);
    return { store, ratio, slipway_p99_ms: p99, goal: { ratio: `>= ${String(goal.ratio)}`, p99_ms: Number.isFinite(goal.p99Ms) ? `<= ${String(goal.p99Ms)}` : 'none' }, met: ratio >= goal.ratio && p99 <= goal.p99Ms && !errors };
  });
  for (const v of verdicts) console.log(`${v.store}: slipway/reference ${v.ratio.toFixed(3)} (goal ${v.goal.ratio}), p99 ${v.slipway_p99_ms.toFixed(2)} ms (goal ${v.goal.p99_ms}): ${v.met ? 'met' : 'NOT met'}`);
  const report = {
    date: new Date().toISOString(),
    machine: await machine(),
    settings: { ...o, pgUrl: undefined, tool: 'wrk', route: 'GET /api/workspaces/:slug/projects/:project_slug' },
    results,
    verdicts,
  };
  console.log(`results: ${writeResult('api', report)}`);
}

if (arg('role', '') === 'reference') {
  await runReference(arg('store', 'sqlite') as StoreKind, arg('where', ''));
} else {
  await main();
}
