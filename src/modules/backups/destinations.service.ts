import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import type { Access } from '../../domain/access.js';
import { conflict, invalid, notFound } from '../../domain/errors.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { StoreOf } from '../../store/db.js';
import type { BackupDestinationRow } from '../../store/repositories/index.js';
import type { BackupDestination, DestinationTest } from './backups.schema.js';
import type { Destinations } from './destinations.js';
import { credentialContext } from './policy.js';
import { endpointProblem } from './s3.js';

interface DestinationInput {
  name?: string | undefined;
  endpoint?: string | undefined;
  region?: string | undefined;
  bucket?: string | undefined;
  prefix?: string | undefined;
  path_style?: boolean | undefined;
  access_key_id?: string | undefined;
  secret_access_key?: string | undefined;
}

/**
 * A workspace's S3-compatible backup destinations (docs/backups.md#destinations): the keys
 * sealed with the secret key and never shown again, the endpoint through the address guard, and
 * the "test" action through the very calls a backup makes.
 */
export class DestinationService {
  constructor(
    private readonly store: StoreOf<'backups'>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    private readonly secrets: Pick<SecretBox, 'seal'>,
    private readonly destinations: Destinations,
  ) {}

  async list(access: Access): Promise<BackupDestination[]> {
    return (await this.store.repos.backups.destinations(access.workspace.id)).map((r) => this.view(r));
  }

  async get(access: Access, id: string): Promise<BackupDestination> {
    return this.view(await this.row(access, id));
  }

  async create(access: Access, input: DestinationInput & { name: string; endpoint: string; bucket: string; access_key_id: string; secret_access_key: string }): Promise<BackupDestination> {
    const id = this.ids.id();
    const now = iso(this.clock.now());
    const row: BackupDestinationRow = {
      id,
      workspace_id: access.workspace.id,
      name: this.name(input.name),
      kind: 's3',
      endpoint: this.endpoint(input.endpoint),
      region: input.region ?? 'us-east-1',
      bucket: input.bucket,
      prefix: prefix(input.prefix ?? ''),
      path_style: input.path_style === true ? 1 : 0,
      access_key_id: this.secrets.seal(input.access_key_id, credentialContext(id, 'access')),
      secret_access_key: this.secrets.seal(input.secret_access_key, credentialContext(id, 'secret')),
      created_at: now,
      updated_at: now,
    };
    await this.store.repos.backups.insertDestination(row);
    return this.view(row);
  }

  async update(access: Access, id: string, input: DestinationInput): Promise<BackupDestination> {
    const old = await this.row(access, id);
    if (Object.values(input).every((v) => v === undefined)) throw invalid('Give at least one field to change.');
    const patch: Partial<BackupDestinationRow> = { updated_at: iso(this.clock.now()) };
    if (input.name !== undefined) patch.name = this.name(input.name);
    if (input.endpoint !== undefined) patch.endpoint = this.endpoint(input.endpoint);
    if (input.region !== undefined) patch.region = input.region;
    if (input.bucket !== undefined) patch.bucket = input.bucket;
    if (input.prefix !== undefined) patch.prefix = prefix(input.prefix);
    if (input.path_style !== undefined) patch.path_style = input.path_style ? 1 : 0;
    if (input.access_key_id !== undefined) patch.access_key_id = this.secrets.seal(input.access_key_id, credentialContext(id, 'access'));
    if (input.secret_access_key !== undefined) patch.secret_access_key = this.secrets.seal(input.secret_access_key, credentialContext(id, 'secret'));
    const moves = ['endpoint', 'bucket', 'prefix', 'path_style', 'region'].some((k) => k in patch && patch[k as keyof BackupDestinationRow] !== old[k as keyof BackupDestinationRow]);
    if (moves && (await this.store.repos.backups.destinationUse(id)).backups > 0) {
      throw conflict('Backups are kept at this destination: its endpoint, region, bucket and prefix cannot change while they are (they would no longer be found). Change the keys only, or add another destination.');
    }
    if (!(await this.store.repos.backups.updateDestination(access.workspace.id, id, patch))) throw notFound('Backup destination');
    return this.view({ ...old, ...patch });
  }

  async delete(access: Access, id: string): Promise<BackupDestination> {
    const row = await this.row(access, id);
    const use = await this.store.repos.backups.destinationUse(id);
    if (use.policies > 0 || use.backups > 0) {
      throw conflict(`The destination is in use (${String(use.policies)} backup polic${use.policies === 1 ? 'y sends' : 'ies send'} to it, ${String(use.backups)} backup${use.backups === 1 ? ' is' : 's are'} kept there); point the policies elsewhere and delete those backups first.`);
    }
    await this.store.repos.backups.deleteDestination(access.workspace.id, id);
    return this.view(row);
  }

  /** The canary round trip through the destination's own client. */
  async test(access: Access, id: string): Promise<DestinationTest> {
    const row = await this.row(access, id);
    const r = await this.destinations.s3(row).test();
    return { ok: r.ok, code: r.code, steps: r.steps.map((x) => ({ step: x.step as DestinationTest['steps'][number]['step'], ok: x.ok, error: x.error })) };
  }

  private async row(access: Access, id: string): Promise<BackupDestinationRow> {
    // another workspace's destination is as unknown as one that does not exist
    const row = await this.store.repos.backups.destination(access.workspace.id, id);
    if (row === undefined) throw notFound('Backup destination');
    return row;
  }

  private name(name: string): string {
    const n = name.trim();
    if (n === '' || n.toLowerCase() === 'local') throw invalid('"name" must be a name of its own ("local" is the built-in destination).');
    return n;
  }

  private endpoint(endpoint: string): string {
    const problem = endpointProblem(endpoint, this.destinations.allowPrivate);
    if (problem !== null) throw invalid(problem);
    return new URL(endpoint).origin;
  }

  private view(r: BackupDestinationRow): BackupDestination {
    let shown = '';
    try {
      shown = this.destinations.s3(r).accessKeyHint();
    } catch {
      shown = '(cannot be opened with this secret key)';
    }
    return { id: r.id, name: r.name, kind: 's3', endpoint: r.endpoint, region: r.region, bucket: r.bucket, prefix: r.prefix, path_style: r.path_style === 1, access_key_id: shown, created_at: r.created_at, updated_at: r.updated_at };
  }
}

/** A prefix ends with "/" (or is empty), never starts with one, and has no "." or ".." parts. */
function prefix(p: string): string {
  const trimmed = p.replace(/^\/+/, '');
  if (trimmed === '') return '';
  const withSlash = trimmed.endsWith('/') ? trimmed : `${trimmed}/`;
  if (withSlash.split('/').slice(0, -1).some((part) => part === '' || part === '.' || part === '..')) throw invalid('"prefix" must be parts separated by single "/", none of them "." or "..".');
  return withSlash;
}
