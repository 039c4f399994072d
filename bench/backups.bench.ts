// Backup and restore throughput of a PostgreSQL database through a real `bin/slipway serve`, beside
// the engine's own tools run by hand on the same data (docs/backups.md#benchmark):
// - backup: `POST …/backups` until `succeeded` (pg_dump in a tool container, sealed, stored, read
//   back) against `pg_dump --format=custom` run by hand in the server's container, to a file;
// - restore: `POST …/databases {restore_from}` until `running` (a new server, pg_restore, the
//   counts compared) against `docker run` of a new server of the same image, a login, and
//   `pg_restore` of that file by hand;
// - the verification's time (`POST …/verify` until `succeeded`), reported beside them.
// Goal: ≤ 1.2× the tools' own time for both.
//
//   npx tsx bench/backups.bench.ts [--gib 1] [--rounds 1]   (make bench-backups)
//   BENCH_DIAGNOSE=1: the restored database's events with their times; =2: the backup is also downloaded and listed (pg_restore --list) beside the by-hand dump
//
// Writes bench/results/backups-<date>.json. Not part of the test suite.
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { pipeline } from 'node:stream/promises';
import Docker from 'dockerode';
import { DEFAULT_PORTS, generatePassword, type DatabaseAddress } from '../src/domain/database.js';
import { serverName } from '../src/modules/databases/health.js';
import { localImage, login, SERVERS } from '../src/modules/databases/servers.js';
import { DockerRuntime } from '../src/adapters/runtime/docker/docker.runtime.js';
import { arg, machine, num, round, sleep, startServe, summary, writeResult } from './support.js';

const GOAL_RATIO = 1.2;
const IMAGE = localImage('postgresql');

interface Db {
  id: string;
  slug: string;
  status: string;
  username: string;
  database_name: string;
  error: string | null;
}

/**
 * `docker exec` of `cmd` in `container`, as a person runs it by hand: `env` given to the docker CLI
 * by name only (`-e NAME`, the value from its environment, never on a command line); stdout to
 * `out` (or discarded), stdin from `input`; fails on a non-zero exit.
 */
async function exec(container: string, cmd: string[], env: Record<string, string>, io: { out?: string; input?: string } = {}): Promise<void> {
  const args = ['exec', ...(io.input === undefined ? [] : ['-i']), ...Object.keys(env).flatMap((k) => ['-e', k]), container, ...cmd];
  const child = spawn('docker', args, { env: { ...process.env, ...env }, stdio: [io.input === undefined ? 'ignore' : 'pipe', io.out === undefined ? 'ignore' : 'pipe', 'pipe'] });
  let err = '';
  child.stderr?.on('data', (c: Buffer) => { err = (err + c.toString()).slice(-2000); });
  const piping: Promise<void>[] = [];
  if (io.input !== undefined && child.stdin !== null) piping.push(pipeline(createReadStream(io.input), child.stdin));
  if (io.out !== undefined && child.stdout !== null) piping.push(pipeline(child.stdout, createWriteStream(io.out)));
  const code = await new Promise<number>((resolve, reject) => { child.once('error', reject); child.once('close', (c) => { resolve(c ?? 1); }); });
  await Promise.all(piping);
  if (code !== 0) throw new Error(`${cmd.join(' ')} exited ${String(code)}: ${err}`);
}

async function until<T>(what: string, get: () => Promise<T | undefined>, timeoutMs = 3_600_000): Promise<T> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const v = await get();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`${what}: timed out`);
    await sleep(250);
  }
}

async function main(): Promise<void> {
  const gib = Number(arg('gib', '1'));
  const rounds = num('rounds', 1);
  const docker = new Docker();
  if ((await docker.getImage(IMAGE).inspect().catch(() => null)) === null) throw new Error(`${IMAGE} is missing: run make db-images`);
  // both sides run the same image: the one this host has (an air-gapped operator names it so; no pull is tried)
  const serve = await startServe('file:///nonexistent', ['--log-level', 'warn', '--database-memory', '1024', '--database-image-postgresql', IMAGE]);
  const work = mkdtempSync(join(tmpdir(), 'slipway-bench-backups-'));
  const rows: Record<string, unknown>[] = [];
  try {
    const slug = (await serve.request<{ slug: string }[]>('GET', '/api/workspaces')).data?.[0]?.slug ?? 'default';
    const base = `/api/workspaces/${slug}/databases`;
    const made = await serve.request<Db & { password: string }>('POST', base, { name: 'bench source', type: 'postgresql' });
    if (made.data === undefined) throw new Error(made.text);
    const source = made.data;
    const password = source.password;
    await until('the source database', async () => {
      const d = (await serve.request<Db>('GET', `${base}/${source.slug}`)).data;
      if (d?.status === 'failed') throw new Error(d.error ?? 'failed');
      return d?.status === 'running' ? d : undefined;
    });
    const container = serverName(source.id);
    const env = { PGPASSWORD: password };
    const target = ['-h', '127.0.0.1', '-U', source.username, '-d', source.database_name];
    // the data: rows of about 300 bytes until the table holds `gib` GiB
    const n = Math.round((gib * 1024 ** 3) / 330);
    const t0 = performance.now();
    await exec(container, ['psql', ...target, '-q', '-v', 'ON_ERROR_STOP=1', '-c', `create table items (id bigint primary key, v text not null); insert into items select g, repeat(md5(g::text), 8) from generate_series(1, ${String(n)}) g; analyze items;`], env);
    const sizeOut = join(work, 'size');
    await exec(container, ['psql', ...target, '-At', '-c', "select pg_database_size(current_database())"], env, { out: sizeOut });
    const dbBytes = Number(readFileSync(sizeOut, 'utf8').trim());
    console.log(JSON.stringify({ loaded_rows: n, database_bytes: dbBytes, seconds: round((performance.now() - t0) / 1000, 1) }));

    const slipwayBackup: number[] = [];
    const refBackup: number[] = [];
    const slipwayRestore: number[] = [];
    const refRestore: number[] = [];
    const verify: number[] = [];
    let artifactBytes = 0;
    let dumpBytes = 0;
    for (let r = 0; r < rounds; r++) {
      // by hand: pg_dump in the server's container, to a file
      const dump = join(work, `by-hand-${String(r)}.dump`);
      let t = performance.now();
      await exec(container, ['pg_dump', '--format=custom', ...target], env, { out: dump });
      refBackup.push((performance.now() - t) / 1000);
      dumpBytes = statSync(dump).size;

      // Slipway
      t = performance.now();
      const taken = await serve.request<{ id: string }>('POST', `${base}/${source.slug}/backups`, {});
      const id = taken.data?.id ?? '';
      const done = await until('the backup', async () => {
        const b = (await serve.request<{ status: string; size: number | null; error: string | null }>('GET', `${base}/${source.slug}/backups/${id}`)).data;
        if (b?.status === 'failed') throw new Error(b.error ?? 'failed');
        return b?.status === 'succeeded' ? b : undefined;
      });
      slipwayBackup.push((performance.now() - t) / 1000);
      artifactBytes = done.size ?? 0;
      console.log(JSON.stringify({ backup: id, seconds: round((performance.now() - t) / 1000, 2), artifact_bytes: artifactBytes, pg_dump_bytes: dumpBytes }));
      if (process.env['BENCH_DIAGNOSE'] === '2') {
        const file = join(work, 'downloaded.dump');
        const got = await fetch(`${serve.api}${base}/${source.slug}/backups/${id}/download`, { headers: { 'x-api-key': serve.key } });
        if (got.body === null) throw new Error(`download: ${String(got.status)}`);
        await pipeline(got.body as unknown as NodeJS.ReadableStream, createWriteStream(file));
        const list = join(work, 'list.txt');
        await exec(container, ['sh', '-c', 'cat > /tmp/d.dump; pg_restore --list /tmp/d.dump; rm /tmp/d.dump'], {}, { input: file, out: list });
        const byHand = join(work, 'list-by-hand.txt');
        await exec(container, ['sh', '-c', 'cat > /tmp/d.dump; pg_restore --list /tmp/d.dump; rm /tmp/d.dump'], {}, { input: dump, out: byHand });
        const cmp = join(work, 'cmp.txt');
        await exec(container, ['sh', '-c', 'cat > /tmp/d.dump; pg_restore -f - -a -t items /tmp/d.dump | wc -l; rm /tmp/d.dump'], {}, { input: file, out: cmp });
        console.log(JSON.stringify({ items_lines_in_download: readFileSync(cmp, 'utf8').trim() }));
        console.log(JSON.stringify({ downloaded_bytes: statSync(file).size, list: readFileSync(list, 'utf8').split('\n').filter((l) => l.includes('TABLE')), by_hand: readFileSync(byHand, 'utf8').split('\n').filter((l) => l.includes('TABLE')) }));
      }

      // by hand: a new server of the same image and the same limits as Slipway's (1 CPU, --database-memory 1024), a login, pg_restore of the file
      t = performance.now();
      const name = `bench-ref-restore-${randomBytes(3).toString('hex')}`;
      const pw = generatePassword((k) => randomBytes(k));
      const address: DatabaseAddress = { type: 'postgresql', host: '127.0.0.1', port: DEFAULT_PORTS.postgresql, username: 'slipway', password: pw, databaseName: 'bench' };
      const port = `${String(DEFAULT_PORTS.postgresql)}/tcp`;
      const c = await docker.createContainer({
        name,
        Image: IMAGE,
        Env: Object.entries(SERVERS.postgresql.env(address, () => generatePassword((k) => randomBytes(k)))).map(([k, v]) => `${k}=${v}`),
        ExposedPorts: { [port]: {} },
        HostConfig: { PortBindings: { [port]: [{ HostIp: '127.0.0.1', HostPort: '' }] }, Mounts: [{ Type: 'volume', Source: name, Target: SERVERS.postgresql.dataPath }], Memory: 1024 * 1024 * 1024, NanoCpus: 1e9, Init: true },
      });
      try {
        await c.start();
        const hostPort = Number((await c.inspect()).NetworkSettings.Ports[port]?.[0]?.HostPort);
        await until('the reference server', async () => login({ ...address, port: hostPort }).then(() => true, () => undefined), 180_000);
        await exec(name, ['pg_restore', '--no-owner', '--no-privileges', '--single-transaction', '--exit-on-error', '-h', '127.0.0.1', '-U', 'slipway', '-d', 'bench'], { PGPASSWORD: pw }, { input: dump });
        refRestore.push((performance.now() - t) / 1000);
      } finally {
        await c.remove({ force: true, v: true }).catch(() => undefined);
        await docker.getVolume(name).remove().catch(() => undefined);
      }

      // Slipway: a new database restored from the backup, until running (its counts compared)
      t = performance.now();
      const restored = await serve.request<Db>('POST', base, { name: `bench restored ${String(r)}`, type: 'postgresql', restore_from: id });
      const rs = restored.data?.slug ?? '';
      await until('the restored database', async () => {
        const d = (await serve.request<Db>('GET', `${base}/${rs}`)).data;
        if (d?.status === 'failed') {
          const events = (await serve.request<{ events: { message: string }[] }>('GET', `${base}/${rs}`)).data?.events ?? [];
          throw new Error(`${d.error ?? 'failed'}\n${events.map((e) => e.message).join('\n')}`);
        }
        return d?.status === 'running' ? d : undefined;
      });
      slipwayRestore.push((performance.now() - t) / 1000);
      if (process.env['BENCH_DIAGNOSE'] === '1') {
        const events = (await serve.request<{ events: { at: string; message: string }[] }>('GET', `${base}/${rs}`)).data?.events ?? [];
        const first = Date.parse(events[0]?.at ?? '');
        console.log(JSON.stringify({ restore_events: events.map((e) => `+${String((Date.parse(e.at) - first) / 1000)} s ${e.message.slice(0, 90)}`) }));
      }
      await serve.request('DELETE', `${base}/${rs}`);

      // the verification, reported beside them
      t = performance.now();
      await serve.request('POST', `${base}/${source.slug}/backups/${id}/verify`);
      await until('the verification', async () => {
        const b = (await serve.request<{ verify_status: string | null; verify_error: string | null }>('GET', `${base}/${source.slug}/backups/${id}`)).data;
        if (b?.verify_status === 'failed') throw new Error(b.verify_error ?? 'failed');
        return b?.verify_status === 'succeeded' ? b : undefined;
      });
      verify.push((performance.now() - t) / 1000);
      await serve.request('DELETE', `${base}/${source.slug}/backups/${id}`);
      rmSync(dump, { force: true });
    }
    const ratio = (a: number[], b: number[]) => round(summary(a, 2).median / summary(b, 2).median, 2);
    const backupRatio = ratio(slipwayBackup, refBackup);
    const restoreRatio = ratio(slipwayRestore, refRestore);
    rows.push(
      { step: 'backup', slipway_seconds: summary(slipwayBackup, 2), by_hand_seconds: summary(refBackup, 2), ratio: backupRatio, goal_ratio: GOAL_RATIO, met: backupRatio <= GOAL_RATIO, artifact_bytes: artifactBytes, pg_dump_bytes: dumpBytes },
      { step: 'restore into a new database', slipway_seconds: summary(slipwayRestore, 2), by_hand_seconds: summary(refRestore, 2), ratio: restoreRatio, goal_ratio: GOAL_RATIO, met: restoreRatio <= GOAL_RATIO },
      { step: 'verification (reported)', slipway_seconds: summary(verify, 2) },
    );
    for (const row of rows) console.log(JSON.stringify(row));
    const report = { date: new Date().toISOString().slice(0, 10), machine: await machine(), gib, rows_loaded: n, database_bytes: dbBytes, rounds, results: rows };
    console.log(`results: ${writeResult('backups', report)}`);
  } finally {
    // stopped first: a running leader would bring back the database containers the purge removes
    const instance = serve.instanceId();
    await serve.stop();
    await new DockerRuntime({ docker }).purge({ labels: { 'slipway.instance': instance } }).catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
