import { spawn } from 'node:child_process';
import { randomBytes, scrypt as scryptCb } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough, Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { createGunzip, createGzip } from 'node:zlib';
import { Open, Seal } from '../../modules/backups/artifact.js';
import { isPostgresUrl } from '../../store/url.js';
import { sqliteLogFile } from '../../store/logs/open.js';
import type { Config } from '../config.js';
import { CliError } from '../errors.js';

// `slipway admin backup` and `slipway admin restore` (docs/operations.md#disaster-recovery): one
// archive of the control plane (the store, by SQLite's online backup or pg_dump; the runtime logs'
// SQLite file; the secret key), sealed with a key derived from a passphrase.
//
// Layout: MAGIC, a 16-byte salt, then the sealed (64 KiB AES-256-GCM records, artifact.ts) gzip
// of entries, each a 4-byte name length, the name, an 8-byte size and the bytes. The first entry
// is manifest.json.

const MAGIC = Buffer.from('SLIPWAY-CONTROL-PLANE/1\n');
const SALT_BYTES = 16;
const scrypt = promisify(scryptCb) as (password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;
/** scrypt at N = 2^15: about 0.1 s and 32 MiB per derivation */
const deriveKey = (passphrase: string, salt: Buffer): Promise<Buffer> => scrypt(passphrase, salt, 32, { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });

/** What the archive says it holds (and a restore checks). */
export interface ControlPlaneManifest {
  format: 'slipway-control-plane/1';
  created_at: string;
  store: 'sqlite' | 'postgresql';
  /** rows per table of the store, as backed up */
  counts: Record<string, number>;
  entries: string[];
}

/** The tables whose counts the manifest keeps: what a person checks after a restore. */
const COUNTED = ['workspaces', 'users', 'members', 'api_keys', 'projects', 'env_vars', 'domains', 'deployments', 'databases', 'wallet_transactions'] as const;

async function passphrase(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read the passphrase file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
  }
  const p = text.replace(/\r?\n$/, '');
  if (p.length < 12) throw new CliError(`the passphrase in ${file} is shorter than 12 characters.`);
  return p;
}

/** PostgreSQL's client tools get the URL's parts in their environment: never a password on a command line. */
function pgEnv(url: string): NodeJS.ProcessEnv {
  const u = new URL(url);
  const env: NodeJS.ProcessEnv = { ...process.env, PGHOST: u.hostname.replace(/^\[(.*)\]$/, '$1'), PGPORT: u.port === '' ? '5432' : u.port, PGDATABASE: decodeURIComponent(u.pathname.slice(1)), PGUSER: decodeURIComponent(u.username), PGPASSWORD: decodeURIComponent(u.password) };
  const ssl = u.searchParams.get('sslmode');
  if (ssl !== null) env['PGSSLMODE'] = ssl;
  return env;
}

async function runTool(cmd: string, args: string[], env: NodeJS.ProcessEnv, io: { stdin?: Readable; stdout?: Writable } = {}): Promise<void> {
  const child = spawn(cmd, args, { env, stdio: [io.stdin === undefined ? 'ignore' : 'pipe', io.stdout === undefined ? 'ignore' : 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => { stderr = (stderr + c.toString('utf8')).slice(-2000); });
  const done = new Promise<number>((resolve, reject) => {
    child.once('error', (err: NodeJS.ErrnoException) => { reject(new CliError(err.code === 'ENOENT' ? `${cmd} is not installed (PostgreSQL's client tools are needed for a PostgreSQL store).` : `${cmd} could not start: ${err.message}`)); });
    child.once('close', (code) => { resolve(code ?? 1); });
  });
  const piping: Promise<void>[] = [];
  if (io.stdin !== undefined && child.stdin !== null) piping.push(pipeline(io.stdin, child.stdin));
  if (io.stdout !== undefined && child.stdout !== null) piping.push(pipeline(child.stdout, io.stdout));
  const [code] = await Promise.all([done, ...piping]);
  if (code !== 0) throw new CliError(`${cmd} failed (exit code ${String(code)}): ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
}

async function sqliteCounts(file: string): Promise<Record<string, number>> {
  const { default: SQLite } = await import('better-sqlite3');
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    const out: Record<string, number> = {};
    for (const t of COUNTED) out[t] = (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
    return out;
  } finally {
    db.close();
  }
}

async function pgCounts(url: string): Promise<Record<string, number>> {
  const { default: pg } = await import('pg');
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const out: Record<string, number> = {};
    for (const t of COUNTED) out[t] = Number((await c.query<{ n: string }>(`SELECT count(*) AS n FROM ${t}`)).rows[0]?.n ?? 0);
    return out;
  } finally {
    await c.end();
  }
}

function entryHeader(name: string, size: number): Buffer {
  const n = Buffer.from(name, 'utf8');
  const h = Buffer.alloc(4 + n.length + 8);
  h.writeUInt32BE(n.length, 0);
  n.copy(h, 4);
  h.writeBigUInt64BE(BigInt(size), 4 + n.length);
  return h;
}

/** The entries, one after the other, as one stream. */
async function* entries(files: { name: string; path?: string; data?: Buffer }[]): AsyncGenerator<Buffer> {
  for (const f of files) {
    const size = f.data?.length ?? (await stat(f.path ?? '')).size;
    yield entryHeader(f.name, size);
    if (f.data !== undefined) yield f.data;
    else for await (const c of createReadStream(f.path ?? '')) yield c as Buffer;
  }
}

/**
 * `slipway admin backup --out FILE --passphrase-file P`: the control plane in one archive, taken
 * while the server runs (SQLite's online backup API; pg_dump's snapshot). The file appears only
 * when complete (written beside it, then renamed), mode 0600.
 */
export async function backupControlPlane(config: Config, o: { out: string; passphraseFile: string }): Promise<{ manifest: ControlPlaneManifest; bytes: number }> {
  const secret = await passphrase(o.passphraseFile);
  if (!existsSync(config.secretKeyFile)) throw new CliError(`the secret key file ${config.secretKeyFile} is missing: without it the archive could not open the store's sealed values.`);
  const work = await mkdtemp(join(tmpdir(), 'slipway-admin-backup-'));
  try {
    const pgStore = isPostgresUrl(config.databaseUrl);
    const files: { name: string; path?: string; data?: Buffer }[] = [];
    let counts: Record<string, number>;
    if (pgStore) {
      const dump = join(work, 'store.pgdump');
      await runTool('pg_dump', ['--format=custom', '--no-owner', '--no-privileges', `--file=${dump}`], pgEnv(config.databaseUrl));
      counts = await pgCounts(config.databaseUrl);
      files.push({ name: 'store.pgdump', path: dump });
    } else {
      if (!existsSync(config.databaseUrl)) throw new CliError(`there is no store at ${config.databaseUrl}.`);
      const { default: SQLite } = await import('better-sqlite3');
      const copy = join(work, 'slipway.db');
      const src = new SQLite(config.databaseUrl, { readonly: true, fileMustExist: true });
      try {
        await src.backup(copy);
      } finally {
        src.close();
      }
      counts = await sqliteCounts(copy);
      files.push({ name: 'slipway.db', path: copy });
      const logs = sqliteLogFile(config.databaseUrl);
      if (existsSync(logs)) {
        const logsCopy = join(work, 'logs.db');
        const l = new SQLite(logs, { readonly: true, fileMustExist: true });
        try {
          await l.backup(logsCopy);
        } finally {
          l.close();
        }
        files.push({ name: 'logs.db', path: logsCopy });
      }
    }
    files.push({ name: 'secret.key', data: await readFile(config.secretKeyFile) });
    const manifest: ControlPlaneManifest = { format: 'slipway-control-plane/1', created_at: new Date().toISOString(), store: pgStore ? 'postgresql' : 'sqlite', counts, entries: files.map((f) => f.name) };
    files.unshift({ name: 'manifest.json', data: Buffer.from(JSON.stringify(manifest, null, 2)) });

    const salt = randomBytes(SALT_BYTES);
    const key = await deriveKey(secret, salt);
    await mkdir(dirname(o.out), { recursive: true });
    const part = `${o.out}.part`;
    try {
      const sink = createWriteStream(part, { mode: 0o600 });
      await new Promise<void>((resolve, reject) => { sink.write(Buffer.concat([MAGIC, salt]), (err) => { if (err) reject(err); else resolve(); }); });
      await pipeline(Readable.from(entries(files)), createGzip({ level: 6 }), new Seal(key), sink);
      await chmod(part, 0o600);
      await rename(part, o.out);
    } catch (err) {
      await rm(part, { force: true });
      throw err;
    }
    return { manifest, bytes: (await stat(o.out)).size };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Reads exactly what is asked from a stream of chunks. */
class Reader {
  private buf: Buffer = Buffer.alloc(0);
  private readonly it: AsyncIterator<Buffer>;
  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }

  /** n bytes; null at a clean end before any of them */
  async exactly(n: number): Promise<Buffer | null> {
    while (this.buf.length < n) {
      const next = await this.it.next();
      if (next.done === true) {
        if (this.buf.length === 0) return null;
        throw new CliError('the archive ends in the middle of an entry: it is incomplete.');
      }
      this.buf = Buffer.concat([this.buf, next.value]);
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** n bytes, written to `out` as they come */
  async copy(n: number, out: Writable): Promise<void> {
    let left = n;
    while (left > 0) {
      if (this.buf.length === 0) {
        const next = await this.it.next();
        if (next.done === true) throw new CliError('the archive ends in the middle of an entry: it is incomplete.');
        this.buf = next.value;
      }
      const piece = this.buf.subarray(0, Math.min(left, this.buf.length));
      this.buf = this.buf.subarray(piece.length);
      left -= piece.length;
      if (!out.write(piece)) await new Promise((r) => out.once('drain', r));
    }
  }
}

const ENTRY_NAMES = new Set(['manifest.json', 'slipway.db', 'logs.db', 'store.pgdump', 'secret.key']);

/**
 * `slipway admin restore --data-dir DIR --passphrase-file P FILE`: the archive into a new data
 * dir (and, for a PostgreSQL store, into the empty database `--database-url` names), then the
 * restored store's counts compared with the archive's manifest.
 */
export async function restoreControlPlane(config: Config, o: { file: string; passphraseFile: string }): Promise<{ manifest: ControlPlaneManifest; counts: Record<string, number> }> {
  const secret = await passphrase(o.passphraseFile);
  const fh = await open(o.file, 'r').catch((err: unknown) => { throw new CliError(`cannot read ${o.file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`); });
  const head = Buffer.alloc(MAGIC.length + SALT_BYTES);
  const { bytesRead } = await fh.read(head, 0, head.length, 0);
  await fh.close();
  if (bytesRead < head.length || !head.subarray(0, MAGIC.length).equals(MAGIC)) throw new CliError(`${o.file} is not an archive made by slipway admin backup.`);
  const there = existsSync(config.dataDir) ? (await readdir(config.dataDir)).filter((f) => f !== 'lost+found') : [];
  if (there.length > 0) throw new CliError(`the data dir ${config.dataDir} is not empty (${there.slice(0, 3).join(', ')}): restore into a new one.`);
  if (existsSync(config.secretKeyFile)) throw new CliError(`the secret key file ${config.secretKeyFile} exists already: restore into a new data dir.`);
  const key = await deriveKey(secret, head.subarray(MAGIC.length));

  const work = await mkdtemp(join(tmpdir(), 'slipway-admin-restore-'));
  try {
    // one pipeline: a failure anywhere (a wrong key, a cut file) reaches the reader as an error
    const opened = new PassThrough();
    pipeline(createReadStream(o.file, { start: head.length }), new Open(key), createGunzip(), opened).catch((err: unknown) => { opened.destroy(err as Error); });
    const reader = new Reader(opened as AsyncIterable<Buffer>);
    let manifest: ControlPlaneManifest | null = null;
    const got = new Set<string>();
    try {
      for (;;) {
        const len = await reader.exactly(4);
        if (len === null) break;
        const name = (await reader.exactly(len.readUInt32BE(0)))?.toString('utf8') ?? '';
        if (!ENTRY_NAMES.has(name) || got.has(name)) throw new CliError(`the archive holds an unexpected entry ${JSON.stringify(name.slice(0, 60))}.`);
        const size = Number((await reader.exactly(8))?.readBigUInt64BE(0) ?? 0n);
        if (name === 'manifest.json') {
          if (size > 1024 * 1024) throw new CliError('the archive\'s manifest is too large.');
          const m = JSON.parse((await reader.exactly(size))?.toString('utf8') ?? '') as { format?: unknown };
          if (m.format !== 'slipway-control-plane/1') throw new CliError(`the archive's format is ${String(m.format)}, which this version cannot restore.`);
          manifest = m as ControlPlaneManifest;
        } else {
          const out = createWriteStream(join(work, name), { mode: 0o600 });
          await reader.copy(size, out);
          await new Promise<void>((resolve, reject) => { out.end(() => { resolve(); }); out.once('error', reject); });
        }
        got.add(name);
      }
    } catch (err) {
      if (err instanceof CliError) throw err;
      const m = err instanceof Error ? err.message : String(err);
      throw new CliError(/does not open|unable to authenticate|Unsupported state/i.test(m) ? 'the archive does not open with this passphrase (or it was changed since it was made).' : `the archive cannot be read: ${m}`);
    }
    if (manifest === null) throw new CliError('the archive has no manifest.');
    for (const e of manifest.entries) if (!got.has(e)) throw new CliError(`the archive is missing ${e}, which its manifest lists.`);

    let counts: Record<string, number>;
    if (manifest.store === 'postgresql') {
      if (!isPostgresUrl(config.databaseUrl)) throw new CliError('the archive holds a PostgreSQL store: give the empty database to restore it into with --database-url postgres://….');
      if ((await pgCounts(config.databaseUrl).catch(() => null)) !== null) throw new CliError('the database --database-url names already holds a Slipway store: restore into an empty one.');
      await runTool('pg_restore', ['--no-owner', '--no-privileges', '--exit-on-error', '--single-transaction', `--dbname=${pgEnv(config.databaseUrl)['PGDATABASE'] ?? ''}`, join(work, 'store.pgdump')], pgEnv(config.databaseUrl));
      counts = await pgCounts(config.databaseUrl);
      await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    } else {
      if (isPostgresUrl(config.databaseUrl)) throw new CliError('the archive holds an SQLite store; leave --database-url unset to restore it into the data dir.');
      await mkdir(dirname(config.databaseUrl), { recursive: true, mode: 0o700 });
      counts = await sqliteCounts(join(work, 'slipway.db'));
      await rename(join(work, 'slipway.db'), config.databaseUrl).catch(async () => { await pipeline(createReadStream(join(work, 'slipway.db')), createWriteStream(config.databaseUrl, { mode: 0o600 })); });
      if (got.has('logs.db')) await pipeline(createReadStream(join(work, 'logs.db')), createWriteStream(sqliteLogFile(config.databaseUrl), { mode: 0o600 }));
    }
    await mkdir(dirname(config.secretKeyFile), { recursive: true, mode: 0o700 });
    await pipeline(createReadStream(join(work, 'secret.key')), createWriteStream(config.secretKeyFile, { mode: 0o600, flags: 'wx' }));
    const differ = COUNTED.filter((t) => counts[t] !== manifest.counts[t]);
    if (differ.length > 0) throw new CliError(`the restored store does not hold what the archive's manifest says (${differ.map((t) => `${t}: ${String(counts[t])} where the manifest has ${String(manifest.counts[t])}`).join('; ')}).`);
    return { manifest, counts };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
