import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { BackupDestinationRow, Repositories } from '../../store/repositories/index.js';
import { credentialContext } from './policy.js';
import { S3Destination } from './s3.js';

/**
 * Where artifacts are kept (docs/backups.md#destinations). Keys are `<workspace>/<database>/<file>`,
 * made by Slipway from ids only. A put is whole or absent: a reader never sees half an object.
 */
export interface Destination {
  /** `local`, or a configured destination's id */
  readonly id: string;
  /** `size`: the body's length when known (a large artifact is streamed, not buffered) */
  put(key: string, body: Readable, size?: number): Promise<void>;
  get(key: string): Promise<Readable>;
  /** bytes of the object; null when absent */
  size(key: string): Promise<number | null>;
  /** false when it was already gone */
  delete(key: string): Promise<boolean>;
}

/** Only what Slipway itself makes: ids, dots, dashes, one slash between parts. */
const KEY = /^[A-Za-z0-9-]+(?:\/[A-Za-z0-9.-]+){1,3}$/;

/** A directory under the data dir (the default destination). */
export class LocalDestination implements Destination {
  readonly id = 'local';
  private readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  private path(key: string): string {
    if (!KEY.test(key) || key.includes('..')) throw new Error(`not a backup object key: ${JSON.stringify(key)}`);
    const p = resolve(this.root, key);
    if (!p.startsWith(this.root + sep)) throw new Error('a backup object key left its directory');
    return p;
  }

  async put(key: string, body: Readable): Promise<void> {
    const path = this.path(key);
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    const part = `${path}.part`;
    try {
      await pipeline(body, createWriteStream(part, { mode: 0o600 }));
      await rename(part, path);
    } catch (err) {
      await rm(part, { force: true });
      throw err;
    }
  }

  async get(key: string): Promise<Readable> {
    const path = this.path(key);
    await stat(path);
    return createReadStream(path);
  }

  async size(key: string): Promise<number | null> {
    try {
      return (await stat(this.path(key))).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async delete(key: string): Promise<boolean> {
    const path = this.path(key);
    const there = (await this.size(key)) !== null;
    await rm(path, { force: true });
    return there;
  }

  /** The database directories of each workspace directory (the sweep's view). */
  async databaseDirs(): Promise<{ workspace: string; database: string }[]> {
    const out: { workspace: string; database: string }[] = [];
    for (const w of await readdir(this.root).catch(() => [] as string[])) {
      for (const d of await readdir(join(this.root, w)).catch(() => [] as string[])) out.push({ workspace: w, database: d });
    }
    return out;
  }

  /** The files of one database directory with their age (the sweep's view). */
  async files(workspace: string, database: string): Promise<{ key: string; modifiedMs: number }[]> {
    const dir = join(this.root, workspace, database);
    const out: { key: string; modifiedMs: number }[] = [];
    for (const f of await readdir(dir).catch(() => [] as string[])) {
      const key = `${workspace}/${database}/${f}`;
      if (!KEY.test(key)) continue;
      const st = await stat(join(dir, f)).catch(() => null);
      if (st?.isFile() === true) out.push({ key, modifiedMs: st.mtimeMs });
    }
    return out;
  }

  async removeDatabaseDir(workspace: string, database: string): Promise<void> {
    const dir = this.path(`${workspace}/${database}/x`).slice(0, -2);
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Every destination a backup can name: `local`, or one of its workspace's S3 destinations, its
 * credentials opened only here. A destination of another workspace is never found.
 */
export class Destinations {
  private readonly clients = new Map<string, { updatedAt: string; d: S3Destination }>();

  constructor(
    private readonly repos: Pick<Repositories, 'backups'>,
    private readonly secrets: Pick<SecretBox, 'open'>,
    readonly local: LocalDestination,
    readonly allowPrivate: boolean,
  ) {}

  /** The workspace's destination `id`; null when it has none of that id. */
  async of(workspaceId: string, id: string): Promise<Destination | null> {
    if (id === this.local.id) return this.local;
    const row = await this.repos.backups.destination(workspaceId, id);
    return row === undefined ? null : this.s3(row);
  }

  /** The client of a configured destination (one per destination and version of its settings). */
  s3(row: BackupDestinationRow): S3Destination {
    const cached = this.clients.get(row.id);
    if (cached !== undefined && cached.updatedAt === row.updated_at) return cached.d;
    const d = new S3Destination(
      {
        id: row.id,
        endpoint: row.endpoint,
        region: row.region,
        bucket: row.bucket,
        prefix: row.prefix,
        pathStyle: row.path_style === 1,
        accessKeyId: this.secrets.open(row.access_key_id, credentialContext(row.id, 'access')),
        secretAccessKey: this.secrets.open(row.secret_access_key, credentialContext(row.id, 'secret')),
      },
      this.allowPrivate,
    );
    this.clients.set(row.id, { updatedAt: row.updated_at, d });
    return d;
  }
}
