import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { conflict, invalid, notFound } from '../../domain/errors.js';
import { passwordContext } from '../databases/policy.js';
import { referenceProblem, resolveReferences } from '../databases/references.js';
import { defaultDomain, defaultUrl, resolveProject, type ProjectRow, type ProjectRef } from '../projects/resolve.js';
import type { DatabaseRow, EnvVarRow, Repositories } from '../../store/repositories/index.js';
import type { StoreOf } from '../../store/db.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { ProjectPolicy } from '../projects/policy.js';
import type { Access } from '../../domain/access.js';
import { envTotalProblem, envValueProblem } from './env-rules.js';
import type { BulkCounts, EnvVar } from './env.schema.js';

/**
 * A project's variables cannot go into a container as they are stored: a deployment fails with
 * this message (which names the variable, never its value) instead of reaching the engine.
 */
export class UnusableEnvError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnusableEnvError';
  }
}

/** A secret variable sealed under another key: a deployment cannot start with it. */
export class UnreadableSecretError extends UnusableEnvError {
  constructor(readonly key: string) {
    super(`The secret variable ${key} cannot be decrypted with this installation's secret key file (was it replaced?); set its value again.`);
    this.name = 'UnreadableSecretError';
  }
}

/** A name a POSIX shell accepts: a letter or underscore, then letters, digits and underscores. */
/** `${url}` and `${domain}` in a template instance's values: its address at each deploy. */
const ADDRESS = /\$\{(url|domain)\}/g;

export const ENV_KEY_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';
export const MAX_ENV_KEY_LENGTH = 256;
export { MAX_ENV_TOTAL_BYTES, MAX_ENV_VALUE_BYTES } from './env-rules.js';
export const MAX_BULK_VARIABLES = 1000;

type EnvRow = EnvVarRow;

/** What the variables are read against: their project, its databases (references) and domains (its address). */
type EnvTables = 'projects' | 'env' | 'databases' | 'domains';

const envView = (row: EnvRow): EnvVar => ({
  id: row.id,
  key: row.key,
  value: row.is_secret === 1 ? '' : row.value,
  is_secret: row.is_secret === 1,
  created_at: row.created_at,
  updated_at: row.updated_at,
});

/** By key, in code-unit order (keys are ASCII): the same on both stores, whatever their collation. */
const byKey = (a: EnvRow, b: EnvRow): number => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/**
 * The schema bounds characters; the service counts bytes and refuses what a container's
 * environment cannot carry (env-rules.ts), naming the field and so the variable.
 */
function checkValue(field: string, what: string, value: string): void {
  const problem = envValueProblem(field, what, value);
  if (problem !== null) throw invalid(problem);
}

/** The project's variables after a write must fit in one container request. */
function checkTotal(vars: Iterable<readonly [string, string]>): void {
  const problem = envTotalProblem(vars);
  if (problem !== null) throw invalid(problem);
}

/**
 * Project environment variables. Secret values are sealed at rest (AES-256-GCM, bound to the
 * project and key) and never leave through the API; only `resolvedFor` opens them, for deploys.
 */
export class EnvService {
  constructor(
    private readonly store: StoreOf<EnvTables>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    private readonly secrets: Pick<SecretBox, 'seal' | 'open' | 'tryOpen'>,
    /** a template instance's `${url}` and `${domain}` */
    private readonly hosts: Pick<ProjectPolicy, 'appsDomain' | 'routerPort'>,
  ) {}

  async list(access: Access, projectSlug: ProjectRef): Promise<EnvVar[]> {
    const project = await resolveProject(this.store.repos, access, projectSlug);
    return (await this.rowsOf(this.store.repos, project.id)).map(envView);
  }

  async create(
    access: Access,
    projectSlug: ProjectRef,
    input: { key: string; value: string; is_secret?: boolean | undefined },
  ): Promise<EnvVar> {
    checkValue('"value"', `"value" of the variable "${input.key}"`, input.value);
    // a key the project has already: 409 from the repository
    return this.write(access, projectSlug, async (tx, project) => {
      await this.checkReferences(tx, project.workspace_id, [[input.key, input.value]]);
      await this.checkTotalWith(tx, project.id, { [input.key]: input.value });
      const now = iso(this.clock.now());
      const secret = input.is_secret ?? false;
      const row: EnvRow = {
        id: this.ids.id(),
        project_id: project.id,
        key: input.key,
        value: secret ? this.seal(project.id, input.key, input.value) : input.value,
        is_secret: secret ? 1 : 0,
        created_at: now,
        updated_at: now,
      };
      await tx.env.insert(row);
      return envView(row);
    });
  }

  /**
   * A new value keeps the variable's secrecy unless `is_secret` says otherwise. Making a plain
   * value secret seals it; making a secret plain needs a new value, since the old one is never
   * revealed. A request that changes nothing leaves the row, and its `updated_at`, as they are.
   */
  async update(
    access: Access,
    projectSlug: ProjectRef,
    envId: string,
    input: { value?: string | undefined; is_secret?: boolean | undefined },
  ): Promise<EnvVar> {
    return this.write(access, projectSlug, async (tx, project) => {
      const row = await this.find(tx, project.id, envId);
      if (input.value !== undefined) checkValue('"value"', `"value" of the variable "${row.key}"`, input.value);
      const wasSecret = row.is_secret === 1;
      const secret = input.is_secret ?? wasSecret;
      if (wasSecret && !secret && input.value === undefined) {
        throw invalid(`Give a new "value" to make the secret "${row.key}" non-secret; its current value is never revealed.`);
      }
      const current = this.plaintext(project.id, row);
      if (current === null && input.value === undefined) {
        throw conflict(`The secret "${row.key}" cannot be decrypted with this installation's secret key (was the key file replaced?); give it a new "value".`);
      }
      const value = input.value ?? current ?? '';
      if (value === current && secret === wasSecret) return envView(row);
      if (value !== current) {
        await this.checkReferences(tx, project.workspace_id, [[row.key, value]]);
        await this.checkTotalWith(tx, project.id, { [row.key]: value });
      }
      const patch = {
        value: secret ? this.seal(project.id, row.key, value) : value,
        is_secret: secret ? 1 : 0,
        updated_at: iso(this.clock.now()),
      };
      await tx.env.update(row.id, patch);
      return envView({ ...row, ...patch });
    });
  }

  async remove(access: Access, projectSlug: ProjectRef, envId: string): Promise<EnvVar> {
    return this.write(access, projectSlug, async (tx, project) => {
      const row = await this.find(tx, project.id, envId);
      await tx.env.delete(row.id);
      return envView(row);
    });
  }

  /**
   * A template instance's `POST …/envs`: each `{key, value, is_secret?}` is set (created, or its
   * value replaced; an existing variable keeps its secrecy unless `is_secret` says otherwise), in
   * one transaction; answers every variable of the instance.
   */
  async setMany(access: Access, projectSlug: ProjectRef, items: readonly { key: string; value: string; is_secret?: boolean | undefined }[]): Promise<EnvVar[]> {
    const keys = new Set<string>();
    for (const [i, item] of items.entries()) {
      checkValue(`"${i.toString()}.value"`, `"value" of the variable "${item.key}"`, item.value);
      if (keys.has(item.key)) throw invalid(`The variable "${item.key}" is given twice.`);
      keys.add(item.key);
    }
    return this.write(access, projectSlug, async (tx, project) => {
      const existing = new Map((await this.rowsOf(tx, project.id)).map((r) => [r.key, r]));
      await this.checkReferences(tx, project.workspace_id, items.map((i) => [i.key, i.value] as const));
      const after = new Map([...existing].map(([key, row]) => [key, this.plaintext(project.id, row) ?? row.value]));
      for (const item of items) after.set(item.key, item.value);
      checkTotal(after);
      const now = iso(this.clock.now());
      for (const item of items) {
        const row = existing.get(item.key);
        const secret = item.is_secret ?? row?.is_secret === 1;
        const value = secret ? this.seal(project.id, item.key, item.value) : item.value;
        if (row === undefined) {
          await tx.env.insert({ id: this.ids.id(), project_id: project.id, key: item.key, value, is_secret: secret ? 1 : 0, created_at: now, updated_at: now });
        } else {
          await tx.env.update(row.id, { value, is_secret: secret ? 1 : 0, updated_at: now });
        }
      }
      return (await this.rowsOf(tx, project.id)).map(envView);
    });
  }

  /** A new template instance's first variables, in its creating transaction (values checked by the catalog). */
  async insertInitial(tx: Pick<Repositories, 'env'>, projectId: string, vars: readonly { key: string; value: string; secret: boolean }[]): Promise<void> {
    if (vars.length === 0) return;
    const now = iso(this.clock.now());
    await tx.env.insert(vars.map((v) => ({ id: this.ids.id(), project_id: projectId, key: v.key, value: v.secret ? this.seal(projectId, v.key, v.value) : v.value, is_secret: v.secret ? 1 : 0, created_at: now, updated_at: now })));
  }

  /** Removes the variable named `key` (a template instance's `DELETE …/envs/:key`). */
  async removeKey(access: Access, projectSlug: ProjectRef, key: string): Promise<EnvVar> {
    return this.write(access, projectSlug, async (tx, project) => {
      const row = (await this.rowsOf(tx, project.id)).find((r) => r.key === key);
      if (row === undefined) throw notFound('Variable');
      await tx.env.delete(row.id);
      return envView(row);
    });
  }

  /**
   * Set many variables at once, in one transaction. `merge` (default true) upserts the given
   * ones; `merge: false` also deletes every variable not named. New variables are plain; an
   * existing one keeps its secrecy. Only values that actually change count as updated.
   */
  async bulk(
    access: Access,
    projectSlug: ProjectRef,
    input: { variables: Record<string, string>; merge?: boolean | undefined },
  ): Promise<BulkCounts> {
    // The schema has checked the names and the count.
    const given = Object.entries(input.variables);
    for (const [key, value] of given) checkValue(`"variables.${key}"`, `"variables.${key}"`, value);
    const merge = input.merge ?? true;
    return this.write(access, projectSlug, async (tx, project) => {
      const existing = new Map((await this.rowsOf(tx, project.id)).map((r) => [r.key, r]));
      const after = new Map(merge ? [...existing].map(([key, row]) => [key, this.plaintext(project.id, row) ?? row.value]) : []);
      for (const [key, value] of given) after.set(key, value);
      await this.checkReferences(tx, project.workspace_id, given, 'variables.');
      checkTotal(after);
      const now = iso(this.clock.now());
      const counts: BulkCounts = { created: 0, updated: 0, deleted: 0 };
      const inserts: EnvRow[] = [];
      for (const [key, value] of given) {
        const row = existing.get(key);
        if (row === undefined) {
          inserts.push({ id: this.ids.id(), project_id: project.id, key, value, is_secret: 0, created_at: now, updated_at: now });
          continue;
        }
        if (this.plaintext(project.id, row) === value) continue;
        const stored = row.is_secret === 1 ? this.seal(project.id, key, value) : value;
        await tx.env.update(row.id, { value: stored, updated_at: now });
        counts.updated++;
      }
      if (inserts.length > 0) await tx.env.insert(inserts);
      counts.created = inserts.length;
      if (!merge) {
        const named = new Set(given.map(([key]) => key));
        counts.deleted = [...existing.keys()].filter((key) => !named.has(key)).length;
        if (counts.deleted > 0) await tx.env.deleteAllBut(project.id, [...named]);
      }
      return counts;
    });
  }

  /**
   * Every variable of the project with secrets opened: what a deployment injects into its
   * containers. Throws UnreadableSecretError, naming the variable, for a secret this
   * installation's key cannot open, and UnusableEnvError for a value a container cannot carry
   * (stored before the API refused such values).
   */
  async resolvedFor(projectId: string): Promise<Record<string, string>> {
    const rows = await this.rowsOf(this.store.repos, projectId);
    const databases = rows.some((row) => row.value.includes('${{') || row.is_secret === 1) ? await this.databasesOf(projectId) : new Map<string, DatabaseRow>();
    // like the databases: asked for only when a value may name them (a sealed one may)
    const address = rows.some((row) => row.value.includes('${url}') || row.value.includes('${domain}') || row.is_secret === 1) ? await this.addressOf(projectId) : null;
    const resolved = Object.fromEntries(
      rows.map((row) => {
        const stored = this.plaintext(projectId, row);
        if (stored === null) throw new UnreadableSecretError(row.key);
        let value: string;
        try {
          value = resolveReferences(`The variable "${row.key}"`, stored, databases, (db) => this.secrets.open(db.password, passwordContext(db.id)));
        } catch (err) {
          throw new UnusableEnvError(`${err instanceof Error ? err.message : String(err)} No container was started with it.`);
        }
        if (address !== null) value = value.replace(ADDRESS, (_m, which: string) => (which === 'url' ? address.url : address.domain));
        const problem = envValueProblem(`The value of the variable "${row.key}"`, `The value of the variable "${row.key}"`, value);
        if (problem !== null) throw new UnusableEnvError(`${problem} Give it a new value; no container was started with it.`);
        return [row.key, value];
      }),
    );
    const total = envTotalProblem(Object.entries(resolved));
    if (total !== null) throw new UnusableEnvError(`${total} Remove or shorten some; no container was started with them.`);
    return resolved;
  }

  /**
   * A template instance's `${domain}` and `${url}` (docs/templates.md#values): its first verified
   * custom domain, else its default one, as it is now; null for a project, where they stay as written.
   */
  private async addressOf(projectId: string): Promise<{ domain: string; url: string } | null> {
    const project = await this.store.repos.projects.byId(projectId);
    if (project?.kind !== 'template') return null;
    const custom = (await this.store.repos.domains.list(projectId)).find((d) => d.verified === 1);
    const domain = custom?.domain ?? defaultDomain(project, this.hosts.appsDomain);
    return { domain, url: defaultUrl(domain, this.hosts.routerPort) };
  }

  /** The opened values of the project's secret variables: what the log analyzer redacts before asking a model. */
  async secretValues(projectId: string): Promise<string[]> {
    const rows = await this.rowsOf(this.store.repos, projectId);
    return rows.filter((row) => row.is_secret === 1).flatMap((row) => {
      const value = this.plaintext(projectId, row);
      return value === null || value === '' ? [] : [value];
    });
  }

  /**
   * Writers of one project's variables take turns, so that a bulk replace reads and rewrites a
   * set no one changes meanwhile. PostgreSQL needs the row lock (NO KEY UPDATE, which does not
   * block inserts elsewhere that reference the project); SQLite runs one writer at a time.
   */
  private write<T>(access: Access, projectSlug: ProjectRef, fn: (tx: Pick<Repositories, EnvTables>, project: ProjectRow) => Promise<T>): Promise<T> {
    return this.store.transaction(async (tx) => {
      const project = await resolveProject(tx, access, projectSlug);
      await tx.projects.lock(project.id, { noKey: true });
      return fn(tx, project);
    });
  }

  /** The databases of the project's workspace, by slug (for its variables' references). */
  private async databasesOf(projectId: string): Promise<Map<string, DatabaseRow>> {
    const project = await this.store.repos.projects.byId(projectId);
    if (project === undefined) return new Map();
    return new Map((await this.store.repos.databases.inWorkspace(project.workspace_id)).map((d) => [d.slug, d]));
  }

  /** Every database a value references must exist in the workspace, with a field a reference can name (400 otherwise). */
  private async checkReferences(repos: Pick<Repositories, EnvTables>, workspaceId: string, entries: readonly (readonly [string, string])[], prefix = ''): Promise<void> {
    if (!entries.some(([, value]) => value.includes('${{'))) return;
    const databases = new Map((await repos.databases.inWorkspace(workspaceId)).map((d) => [d.slug, d]));
    for (const [key, value] of entries) {
      const problem = referenceProblem(prefix === '' ? `The variable "${key}"` : `"${prefix}${key}"`, value, databases);
      if (problem !== null) throw invalid(problem);
    }
  }

  /** The project's variables with `changes` applied must fit in a container request (400 otherwise). */
  private async checkTotalWith(repos: Pick<Repositories, EnvTables>, projectId: string, changes: Readonly<Record<string, string>>): Promise<void> {
    const vars = new Map<string, string>();
    // a secret this key cannot open counts as its sealed length, an upper bound of its plaintext
    for (const row of await this.rowsOf(repos, projectId)) vars.set(row.key, this.plaintext(projectId, row) ?? row.value);
    for (const [key, value] of Object.entries(changes)) vars.set(key, value);
    checkTotal(vars);
  }

  private async rowsOf(repos: Pick<Repositories, EnvTables>, projectId: string): Promise<EnvRow[]> {
    return (await repos.env.list(projectId)).sort(byKey);
  }

  /** The variable `envId` of this project, or 404: an id of another project is not found here. */
  private async find(repos: Pick<Repositories, EnvTables>, projectId: string, envId: string): Promise<EnvRow> {
    const row = await repos.env.find(projectId, envId);
    if (row === undefined) throw notFound('Environment variable');
    return row;
  }

  /** The context binds a sealed value to its row: copied to another project or key, it does not open. */
  private seal(projectId: string, key: string, value: string): string {
    return this.secrets.seal(value, `env:${projectId}:${key}`);
  }

  /** null for a secret this installation's key cannot open (sealed under another key file) */
  private plaintext(projectId: string, row: EnvRow): string | null {
    return row.is_secret === 1 ? this.secrets.tryOpen(row.value, `env:${projectId}:${row.key}`) : row.value;
  }
}
