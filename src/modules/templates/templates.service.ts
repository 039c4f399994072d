import type { WalletService } from '../billing/wallet.service.js';
import type { DatabaseService } from '../databases/databases.service.js';
import { generatePassword, type DatabaseType } from '../../domain/database.js';
import { conflict, invalid, notFound } from '../../domain/errors.js';
import type { ProjectRecord } from '../../domain/project.js';
import { uuidv4, type Random } from '../../domain/clock.js';
import type { StoreOf } from '../../store/db.js';
import type { ProjectPolicy } from '../projects/policy.js';
import type { DeployService } from '../deployments/deploy.service.js';
import type { EnvService } from '../env/env.service.js';
import type { GitService } from '../projects/git.service.js';
import type { ProjectPatch, ProjectService } from '../projects/projects.service.js';
import { resolveProject, templateRef } from '../projects/resolve.js';
import type { Deployment } from '../deployments/deployments.schema.js';
import { projectView } from '../projects/views.js';
import type { Access } from '../../domain/access.js';
import { GENERATOR, publicView, TEMPLATE_DB_REF, type Catalog, type CatalogEntry, type CatalogView } from './catalog.js';
import type { NewTemplateInstance, TemplateInstance } from './templates.schema.js';

export type DeployMode = 'image' | 'build';

/**
 * Template instances (docs/templates.md): a catalog entry made into a project of kind
 * `template` with its variables filled (generated secrets, its address, its database wired),
 * deployed from the catalog's image or built from the entry's source through the same pipeline
 * as projects. Env, domains, deployments, logs, rollback and redeploy are the projects' own
 * services, reached through `templateRef`.
 */
export class TemplateService {
  constructor(
    private readonly store: StoreOf<'projects' | 'gitConnections' | 'databases'>,
    private readonly random: Random,
    /** the catalog in force: the shipped one and `--template-catalog`'s entries */
    private readonly catalog: Catalog,
    private readonly hosts: Pick<ProjectPolicy, 'appsDomain' | 'routerPort' | 'publicUrl'>,
    private readonly wallets: WalletService,
    private readonly projects: ProjectService,
    private readonly envVars: EnvService,
    private readonly databases: DatabaseService,
    private readonly deploys: DeployService,
    private readonly git: GitService,
  ) {}

  available(): CatalogView[] {
    return this.catalog.entries().map(publicView);
  }

  private entry(key: string): CatalogEntry {
    const entry = this.catalog.get(key);
    if (entry !== undefined) return entry;
    const near = this.catalog.near(key);
    throw invalid(`"template_name" "${key}" is not in the catalog${near.length > 0 ? `; did you mean ${near.map((n) => `"${n}"`).join(', ')}?` : ''} (GET /api/workspaces/available-templates lists them).`);
  }

  /**
   * The instance, and the values generated for it (`generated_envs`): shown this once, like a
   * database's password, since they are kept as secrets (an app's first admin password is one).
   */
  async create(access: Access, input: { name: string; template_name: string }): Promise<NewTemplateInstance> {
    const entry = this.entry(input.template_name);
    const type = entry.databases[0];
    // a database is provisioned with it: like POST …/databases, not on an empty wallet
    if (type !== undefined) await this.wallets.requireFunds(access.workspace.id);
    const database = type === undefined ? null : await this.databases.prepare(access, { name: input.name, type }, null);
    const initial = this.initialEnv(entry, database?.row.slug ?? null);
    const row = await this.projects.insert(
      access,
      { name: input.name, port: Number(entry.default_port), cpu: entry.default_cpu, ram: entry.default_ram },
      { kind: 'template', template_name: entry.key, volumes: entry.volumes.length === 0 ? null : JSON.stringify(entry.volumes), command: entry.command === undefined ? null : JSON.stringify(entry.command), health_path: entry.health_path ?? null },
      async (tx, project) => {
        if (database !== null) {
          database.row.owner_project_id = project.id;
          // a slug the workspace has already: 409 from the repository
          await this.databases.insert(tx, database.row);
        }
        await this.envVars.insertInitial(tx, project.id, initial);
      },
    );
    if (database !== null) this.databases.wake();
    return { ...this.view(row, database === null ? [] : [database.row.slug]), generated_envs: Object.fromEntries(initial.filter((v) => v.secret).map((v) => [v.key, v.value])) };
  }

  /**
   * The entry's preset variables with their generators filled (once: kept as secrets), their
   * database references pointed at the instance's own database; `${url}` and `${domain}` stay,
   * resolved at each deploy.
   */
  private initialEnv(entry: CatalogEntry, databaseSlug: string | null): { key: string; value: string; secret: boolean }[] {
    const bytes = (n: number): Buffer => this.random.bytes(n);
    return Object.entries(entry.env).map(([key, template]) => {
      const generated = template.search(GENERATOR) !== -1;
      const value = template
        .replace(GENERATOR, (_text, kind: string | undefined, n: string | undefined) => {
          const size = Number(n);
          if (kind === 'password') return generatePassword(bytes, size);
          if (kind === 'hex') return bytes(size).toString('hex');
          if (kind === 'base64') return bytes(size).toString('base64');
          return uuidv4(this.random);
        })
        .replace(TEMPLATE_DB_REF, (_m, _type: DatabaseType, field: string) => `\${{databases.${databaseSlug ?? ''}.${field}}}`);
      // generated values are secrets; a database reference is kept as written (the password is only put in at deploy time)
      return { key, value, secret: generated };
    });
  }

  async list(access: Access): Promise<TemplateInstance[]> {
    const rows = await this.store.repos.projects.list(access.workspace.id, 'template');
    return Promise.all(rows.map(async (r) => this.view(r, await this.ownedDatabases(r.id))));
  }

  async get(access: Access, slug: string): Promise<TemplateInstance> {
    const row = await resolveProject(this.store.repos, access, templateRef(slug));
    return this.view(row, await this.ownedDatabases(row.id));
  }

  /** `name, port, cpu, ram, replicas`; a running instance takes a new size at once (a rolling redeploy). */
  async update(access: Access, slug: string, patch: ProjectPatch): Promise<TemplateInstance> {
    const ref = templateRef(slug);
    await this.projects.update(access, ref, patch);
    if (patch.replicas !== undefined || patch.cpu !== undefined || patch.ram !== undefined) await this.deploys.resized(access, ref);
    return this.get(access, slug);
  }

  /**
   * Its containers and routes go (as a project's: its hosts at once, its containers and data
   * volumes at the engine's next pass), its logs, and the databases it provisioned (with their
   * servers and data, by the database worker).
   */
  async delete(access: Access, slug: string, logsLeft: (err: unknown) => void): Promise<TemplateInstance> {
    const ref = templateRef(slug);
    const row = await resolveProject(this.store.repos, access, ref);
    const view = this.view(row, await this.ownedDatabases(row.id));
    await this.store.transaction((tx) => this.databases.deleteOwnedBy(tx, row.id));
    this.databases.wake();
    await this.projects.delete(access, ref, logsLeft);
    return view;
  }

  /**
   * `image`: the catalog's image, no build; `build`: the entry's source repository through the
   * deploy pipeline (its Git connection made or brought in line with the catalog first). Every
   * required variable must have a value first (400 naming each missing one).
   */
  async deploy(access: Access, slug: string, mode: DeployMode): Promise<Deployment> {
    const ref = templateRef(slug);
    const row = await resolveProject(this.store.repos, access, ref);
    const entry = this.catalog.get(row.template_name ?? '');
    if (entry === undefined) throw conflict(`The template "${row.template_name ?? ''}" of this instance is no longer in the catalog; it cannot be deployed again (its running deployment, if any, goes on).`);
    const values = new Map((await this.envVars.list(access, ref)).map((v) => [v.key, v]));
    const missing = entry.required_envs.map((r) => r.key).filter((k) => {
      const v = values.get(k);
      return v === undefined || (!v.is_secret && v.value === '');
    });
    if (missing.length > 0) throw invalid(`Set ${missing.length === 1 ? 'the required variable' : 'the required variables'} ${missing.map((m) => `"${m}"`).join(', ')} (POST …/envs) before deploying.`);
    if (mode === 'image') return this.deploys.deployImage(access, ref, entry.image);
    const repo = repoOf(entry.source);
    const wanted = { repo_full_name: repo, branch: entry.build?.branch ?? 'main', dockerfile_path: entry.build?.dockerfile ?? 'Dockerfile', root_dir: entry.build?.root_dir ?? '', auto_deploy: false };
    const current = await this.store.repos.gitConnections.of(row.id);
    if (current === undefined) await this.git.connect(access, ref, wanted);
    else await this.git.update(access, ref, wanted);
    return this.deploys.deploy(access, ref, {});
  }

  /** Stops what it serves (its running deployment). */
  stop(access: Access, slug: string): Promise<Deployment> {
    return this.deploys.stopServing(access, templateRef(slug));
  }

  private async ownedDatabases(projectId: string): Promise<string[]> {
    return (await this.store.repos.databases.ownedBy(projectId)).map((d) => d.slug);
  }

  private view(row: ProjectRecord, databases: string[]): TemplateInstance {
    const p = projectView(row, '', this.hosts, undefined);
    return {
      id: p.id,
      name: p.name,
      slug: p.slug,
      template_name: row.template_name ?? '',
      status: p.status,
      port: p.port,
      cpu: p.cpu,
      ram: p.ram,
      replicas: p.replicas,
      url: p.url,
      default_domain: p.default_domain,
      databases,
      created_at: p.created_at,
      updated_at: p.updated_at,
    };
  }
}

/** `owner/repo` of a source URL (`https://github.com/owner/repo`), as the Git host base URL serves it. */
export function repoOf(source: string): string {
  const parts = new URL(source).pathname.replace(/\.git$/, '').split('/').filter((x) => x !== '');
  if (parts.length < 2) throw notFound('Source repository');
  return `${parts[0] ?? ''}/${parts[1] ?? ''}`;
}
