// Router throughput and latency, in one run: the upstream hit directly, plain nginx with a
// minimal hand-written proxy config, Slipway's nginx driver, Slipway's Node driver, and a plain
// http-proxy-3 proxy (the Node driver's baseline). Load comes from `wrk` (Debian package `wrk`).
//
//   npx tsx bench/router.bench.ts [--duration 10] [--connections 64] [--threads 2]
//
// Writes bench/results/router-<date>.json and prints a table. Not part of the test suite.
import { execFile, fork, spawn, type ChildProcess } from 'node:child_process';
import { freePort } from '../test/factories/process.js';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { connect } from 'node:net';
import { ProxyServer } from 'http-proxy-3';
import { findNginx, NginxDriver } from '../src/adapters/router/nginx.driver.js';
import { NodeProxyDriver } from '../src/adapters/router/node-proxy.driver.js';
import { RouteTable } from '../src/adapters/router/route-table.js';
import { assertWrk, wrk, type Measure } from './support.js';

const execFileP = promisify(execFile);
const HOST = 'bench.test';
const BODY = Buffer.alloc(1024, 'x');
const SELF = fileURLToPath(import.meta.url);

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i === -1 ? undefined : Number(process.argv[i + 1]);
  return v === undefined || !Number.isFinite(v) ? fallback : v;
}


async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
      s.on('error', () => { resolve(false); });
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`);
}

// ---------------------------------------------------------------------------------------------
// Child roles: each server runs in its own process, as it would in production.

type Role = 'upstream' | 'node-driver' | 'http-proxy-3';

async function runRole(role: Role, upstreamPort: number): Promise<void> {
  let port: number;
  switch (role) {
    case 'upstream': {
      const server = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': BODY.length });
        res.end(BODY);
      });
      await new Promise<void>((r) => { server.listen(0, '127.0.0.1', r); });
      port = (server.address() as { port: number }).port;
      break;
    }
    case 'node-driver': {
      const driver = new NodeProxyDriver({ listen: { host: '127.0.0.1', port: 0 } });
      await driver.start();
      await driver.apply(RouteTable.empty().setProject('bench', { hosts: [HOST], upstreams: [{ host: '127.0.0.1', port: upstreamPort }] }));
      port = driver.address().port;
      break;
    }
    case 'http-proxy-3': {
      const proxy = new ProxyServer({ target: `http://127.0.0.1:${upstreamPort}` });
      proxy.on('error', () => undefined);
      const server = createServer((req, res) => { proxy.web(req, res); });
      await new Promise<void>((r) => { server.listen(0, '127.0.0.1', r); });
      port = (server.address() as { port: number }).port;
      break;
    }
  }
  process.send?.({ port });
}

function startRole(role: Role, upstreamPort = 0): Promise<{ port: number; child: ChildProcess }> {
  const child = fork(SELF, ['--role', role, '--upstream', String(upstreamPort)], { stdio: 'inherit' });
  return new Promise((resolve, reject) => {
    child.once('message', (m: { port: number }) => { resolve({ port: m.port, child }); });
    child.once('exit', (code) => { reject(new Error(`${role} exited (${String(code)}) before listening`)); });
  });
}

// ---------------------------------------------------------------------------------------------
// Plain nginx: the minimal proxy config an operator would write by hand.

async function startPlainNginx(binary: string, dir: string, upstreamPort: number): Promise<{ port: number; stop: () => Promise<void> }> {
  const port = await freePort();
  mkdirSync(join(dir, 'temp'), { recursive: true });
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `daemon off;
master_process on;
worker_processes auto;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/temp/body;
  proxy_temp_path ${dir}/temp/proxy;
  fastcgi_temp_path ${dir}/temp/fastcgi;
  uwsgi_temp_path ${dir}/temp/uwsgi;
  scgi_temp_path ${dir}/temp/scgi;
  upstream app { server 127.0.0.1:${upstreamPort}; keepalive 32; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
    }
  }
}
`,
  );
  const child = spawn(binary, ['-p', `${dir}/`, '-e', join(dir, 'error.log'), '-c', conf], { stdio: 'inherit', detached: true });
  await waitForPort(port);
  return {
    port,
    stop: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGQUIT');
      await exited;
    },
  };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const o = { duration: arg('duration', 10), connections: arg('connections', 64), threads: arg('threads', 2) };
  await assertWrk();
  const nginx = findNginx();
  if (nginx === undefined) throw new Error('nginx is not installed: apt-get install nginx-light');
  const nginxVersion = (await execFileP(nginx, ['-v'])).stderr.trim();

  const scratch = mkdtempSync(join(tmpdir(), 'slipway-bench-'));
  const children: ChildProcess[] = [];
  const stops: (() => Promise<void>)[] = [];
  const results: Measure[] = [];
  try {
    const upstream = await startRole('upstream');
    children.push(upstream.child);
    console.log(`upstream on ${upstream.port}; wrk -t${o.threads} -c${o.connections} -d${o.duration}s per target`);

    const run = async (target: string, port: number) => {
      const m = await wrk(target, `http://127.0.0.1:${port}/`, { ...o, headers: { Host: HOST } });
      results.push(m);
      console.log(`${target.padEnd(18)} ${String(m.requestsPerSec).padStart(8)} req/s  p50 ${m.latencyP50Ms.toFixed(2)} ms  p99 ${m.latencyP99Ms.toFixed(2)} ms${m.non2xx + m.socketErrors > 0 ? `  (non-2xx ${m.non2xx}, socket errors ${m.socketErrors})` : ''}`);
    };

    await run('direct', upstream.port);

    const plain = await startPlainNginx(nginx, join(scratch, 'plain'), upstream.port);
    stops.push(plain.stop);
    await run('plain nginx', plain.port);
    await plain.stop();
    stops.pop();

    const driver = new NginxDriver({ listen: { host: '127.0.0.1', port: await freePort() }, dir: join(scratch, 'driver'), binary: nginx });
    await driver.start();
    stops.push(() => driver.stop());
    await driver.apply(RouteTable.empty().setProject('bench', { hosts: [HOST], upstreams: [{ host: '127.0.0.1', port: upstream.port }] }));
    await run('nginx driver', driver.address().port);
    await driver.stop();
    stops.pop();

    const node = await startRole('node-driver', upstream.port);
    children.push(node.child);
    await run('node driver', node.port);
    node.child.kill();

    const hp3 = await startRole('http-proxy-3', upstream.port);
    children.push(hp3.child);
    await run('plain http-proxy-3', hp3.port);
    hp3.child.kill();
  } finally {
    for (const stop of stops) await stop().catch(() => undefined);
    for (const c of children) c.kill();
    rmSync(scratch, { recursive: true, force: true });
  }

  const rps = (t: string) => results.find((r) => r.target === t)?.requestsPerSec ?? Number.NaN;
  const ratio = (a: string, b: string) => Math.round((rps(a) / rps(b)) * 1000) / 1000;
  const report = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? '', node: process.version, nginx: nginxVersion },
    settings: { ...o, body_bytes: BODY.length, tool: 'wrk', host_header: HOST },
    results,
    ratios: {
      plain_nginx_vs_direct: ratio('plain nginx', 'direct'),
      nginx_driver_vs_plain_nginx: ratio('nginx driver', 'plain nginx'),
      node_driver_vs_direct: ratio('node driver', 'direct'),
      node_driver_vs_plain_http_proxy_3: ratio('node driver', 'plain http-proxy-3'),
    },
    goals: { nginx_driver_vs_plain_nginx: '>= 0.9', node_driver_vs_plain_http_proxy_3: '>= 1.0' },
  };
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `router-${report.date.slice(0, 10)}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(JSON.stringify(report.ratios));
  console.log(`written to ${file}`);
}

const roleAt = process.argv.indexOf('--role');
if (roleAt === -1) {
  await main();
} else {
  await runRole(process.argv[roleAt + 1] as Role, Number(process.argv[process.argv.indexOf('--upstream') + 1]));
}
