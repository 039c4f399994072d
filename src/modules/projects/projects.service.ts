import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { conflict, Duplicate, invalid, notFound } from '../../domain/errors.js';
import type { LogStore } from '../../domain/logs.js';
import type { Engine } from '../../domain/ports.js';
import { slugify } from '../../domain/slug.js';
import type { ProjectRecord } from '../../domain/project.js';
import type { Access } from '../../domain/access.js';
import type { Late } from '../../domain/late.js';
import type { Repositories } from '../../store/repositories/index.js';
import type { StoreOf } from '../../store/db.js';
import { holdMemoryRoom, holdProjectRoom, type TenantLimits } from '../tenancy/policy.js';
import type { ProjectPolicy } from './policy.js';
import { projectReservationMb } from '../../store/repositories/capacity.js';
import { canonical, CPU_BOUNDS, formatAge, formatBytes, formatMillicores, inBounds, millicores, RAM_BOUNDS, ramBytes } from './resources.js';
import { defaultDomain, defaultHostLabel, resolveProject, type ProjectRef } from './resolve.js';
import type { Project, ProjectStatus } from './projects.schema.js';
import { projectView } from './views.js';

export interface ProjectInput {
  name: string;
  port?: number | undefined;
  replicas?: number | undefined;
  cpu?: string | undefined;
  ram?: string | undefined;
}

export type ProjectPatch = Partial<ProjectInput>;

/** What a template instance writes in the transaction that creates its project (its variables and database). */
export type InstanceTables = 'env' | 'databases' | 'capacity';

export const PROJECT_DEFAULTS = { port: 8080, replicas: 1, cpu: CPU_BOUNDS.def, ram: RAM_BOUNDS.def } as const;

/** cpu and ram arrive as decimal strings; the schema checks the form, this the range. */
function checkSizes(input: { cpu?: string | undefined; ram?: string | undefined }): void {
  if (input.cpu !== undefined && !inBounds(input.cpu, CPU_BOUNDS)) {
    throw invalid(`"cpu" must be between "${CPU_BOUNDS.min.toString()}" and "${CPU_BOUNDS.max.toString()}" vCPU.`);
  }
  if (input.ram !== undefined && !inBounds(input.ram, RAM_BOUNDS)) {
    throw invalid(`"ram" must be between "${RAM_BOUNDS.min.toString()}" and "${RAM_BOUNDS.max.toString()}" GiB.`);
  }
}

/** The project's own row was refused as a duplicate (not a database or variable of an instance): which name, is read after the rollback. */
class NameTaken extends Error {}

export class ProjectService {
  constructor(
    private readonly store: StoreOf<'projects' | 'gitConnections' | 'deployments' | InstanceTables>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    private readonly policy: ProjectPolicy,
    private readonly limits: TenantLimits,
    private readonly logs: Pick<LogStore, 'deleteProject'>,
    private readonly engine: Late<Pick<Engine, 'pods' | 'routesChanged'>>,
    /** scaling up is paid work (docs/billing.md#payment-required) */
    private readonly funds: { requireFunds(workspaceId: string): Promise<void> } = { requireFunds: () => Promise.resolve() },
  ) {}

  async create(access: Access, input: ProjectInput): Promise<Project> {
    const row = await this.insert(access, input, { kind: 'project', template_name: null, volumes: null, command: null, health_path: null });
    return projectView(row, access.workspace.slug, this.policy, undefined);
  }

  /**
   * A new project or template instance (`kind`): sizes and name checked, the workspace's
   * project limit held, slug and default host unique (409 naming which). `also` runs in the same
   * transaction (an instance's variables and databases).
   */
  async insert(
    access: Access,
    input: ProjectInput,
    kind: Pick<ProjectRecord, 'kind' | 'template_name' | 'volumes' | 'command' | 'health_path'>,
    also?: (tx: Pick<Repositories, InstanceTables>, row: ProjectRecord) => Promise<void>,
  ): Promise<ProjectRecord> {
    checkSizes(input);
    const slug = slugify(input.name);
    if (slug === '') throw invalid('"name" must contain at least one ASCII letter or digit.');
    // `<project>-<workspace>` is one DNS label of the default domain: at most 63 characters.
    const room = 63 - 1 - access.workspace.slug.length;
    if (slug.length > room) {
      throw invalid(`"name" is too long: its slug "${slug}" must have at most ${room.toString()} characters in this workspace, to fit the default domain.`);
    }
    const now = iso(this.clock.now());
    const row: ProjectRecord = {
      id: this.ids.id(),
      workspace_id: access.workspace.id,
      name: input.name,
      slug,
      port: input.port ?? PROJECT_DEFAULTS.port,
      replicas: input.replicas ?? PROJECT_DEFAULTS.replicas,
      cpu: canonical(input.cpu ?? PROJECT_DEFAULTS.cpu),
      ram: canonical(input.ram ?? PROJECT_DEFAULTS.ram),
      status: 'pending',
      created_at: now,
      updated_at: now,
      host_label: defaultHostLabel(slug, access.workspace.slug),
      ...kind,
    };
    try {
      // `--max-projects-per-workspace` (instances count too): counted and inserted in one transaction
      await this.store.transaction(async (tx) => {
        await holdProjectRoom(this.limits, tx, access.workspace.id);
        await tx.projects.insert(row).catch((err: unknown) => {
          throw err instanceof Duplicate ? new NameTaken() : err;
        });
        await also?.(tx, row);
      });
    } catch (err) {
      // read after the rollback: PostgreSQL answers nothing more inside a failed transaction
      if (err instanceof NameTaken) throw await this.takenName(access, row);
      throw err;
    }
    return row;
  }

  /**
   * Which unique index refused a new project: its slug in the workspace, or its default host on
   * the platform (`shop-api` in `alpha` and `shop` in `api-alpha` would share one). The second
   * names neither the workspace nor the project that holds the host.
   */
  private async takenName(access: Access, row: ProjectRecord): Promise<Error> {
    const same = await this.store.repos.projects.inWorkspace(access.workspace.id, row.slug);
    if (same !== undefined) return conflict(`A ${same.kind === 'template' ? 'template instance' : 'project'} with slug "${row.slug}" already exists in this workspace.`);
    return conflict(`The default domain "${defaultDomain(row, this.policy.appsDomain)}" of this project is already taken by another project on this platform; choose another project name.`);
  }

  async list(access: Access): Promise<Project[]> {
    const { projects, gitConnections } = this.store.repos;
    const rows = await projects.list(access.workspace.id);
    const gits = await gitConnections.ofProjects(rows.map((r) => r.id));
    const byProject = new Map(gits.map((g) => [g.project_id, g]));
    return rows.map((r) => projectView(r, access.workspace.slug, this.policy, byProject.get(r.id)));
  }

  async get(access: Access, projectSlug: ProjectRef): Promise<Project> {
    if (typeof projectSlug !== 'string') return this.view(access, await resolveProject(this.store.repos, access, projectSlug));
    const found = await this.store.repos.projects.inWorkspaceWithGit(access.workspace.id, projectSlug);
    if (found?.project.kind !== 'project') throw notFound('Project');
    return projectView(found.project, access.workspace.slug, this.policy, found.git);
  }

  /** The slug stays when the name changes: it is the project's address in URLs and hosts. */
  async update(access: Access, projectSlug: ProjectRef, patch: ProjectPatch): Promise<Project> {
    checkSizes(patch);
    const row = await resolveProject(this.store.repos, access, projectSlug);
    const next: ProjectRecord = {
      ...row,
      ...(patch.name === undefined ? {} : { name: patch.name }),
      ...(patch.port === undefined ? {} : { port: patch.port }),
      ...(patch.replicas === undefined ? {} : { replicas: patch.replicas }),
      ...(patch.cpu === undefined ? {} : { cpu: canonical(patch.cpu) }),
      ...(patch.ram === undefined ? {} : { ram: canonical(patch.ram) }),
      updated_at: iso(this.clock.now()),
    };
    // More replicas, vCPU or memory cost more every minute: not without credit (nothing is saved then).
    const grows = next.replicas > row.replicas || Number(next.cpu) > Number(row.cpu) || Number(next.ram) > Number(row.ram);
    if (grows) await this.funds.requireFunds(row.workspace_id);
    // A project that serves takes its new size at once: not past what the installation may reserve (409, nothing saved).
    if (grows && (await this.store.repos.deployments.serving(row.id)) !== undefined) {
      await holdMemoryRoom(this.limits, this.store.repos, row.id, projectReservationMb(next));
    }
    await this.store.repos.projects.update(row.id, { name: next.name, port: next.port, replicas: next.replicas, cpu: next.cpu, ram: next.ram, updated_at: next.updated_at });
    return this.view(access, next);
  }

  /**
   * Env vars, domains, the Git connection, the monitor and deployments cascade from the row. Its
   * logs go next, in chunks outside the store's transaction (docs/logs.md#layout). Their failure
   * does not undo the deletion: `logsLeft` hears of it, and the lines age out with the
   * workspace's retention; nothing reads them, since a new project gets a new id.
   */
  async delete(access: Access, projectSlug: ProjectRef, logsLeft: (err: unknown) => void = () => undefined): Promise<Project> {
    const row = await resolveProject(this.store.repos, access, projectSlug);
    const view = await this.view(access, row);
    await this.store.repos.projects.delete(row.id);
    await this.logs.deleteProject(row.id).catch(logsLeft);
    // Its hosts stop being routed now, not at the reconciler's next pass: a host it frees may be
    // claimed by another project at once. (Its containers go as orphans in that pass.) A router
    // that refuses the change is logged by the engine, and its reconciler converges.
    await this.engine.get().routesChanged(row.id).catch(() => undefined);
    return view;
  }

  /** The status view: the serving deployment's containers and their use, read from the engine. */
  async status(access: Access, projectSlug: ProjectRef): Promise<ProjectStatus> {
    const row = await resolveProject(this.store.repos, access, projectSlug);
    const latest = await this.store.repos.deployments.latest(row.id);
    const serving = await this.store.repos.deployments.serving(row.id);
    const pods = serving === undefined ? [] : await this.engine.get().pods(row.id, serving.id);
    const now = this.clock.now().getTime();
    return {
      project: { slug: row.slug, status: row.status },
      pods: {
        ready: pods.filter((p) => p.ready).length,
        total: pods.length,
        items: pods.map((p) => ({ name: p.name, status: p.status, restarts: p.restarts, age: formatAge(p.startedAt === null ? 0 : now - p.startedAt.getTime()) })),
      },
      resources: {
        cpu: { used: formatMillicores(pods.reduce((sum, p) => sum + p.cpuMillicores, 0)), limit: formatMillicores(millicores(row.cpu) * row.replicas) },
        memory: { used: formatBytes(pods.reduce((sum, p) => sum + p.memoryBytes, 0)), limit: formatBytes(ramBytes(row.ram) * row.replicas) },
      },
      latestDeployment: latest === undefined ? null : { id: latest.id, status: latest.status, created_at: latest.created_at },
    };
  }

  private async view(access: Access, row: ProjectRecord): Promise<Project> {
    const git = await this.store.repos.gitConnections.of(row.id);
    return projectView(row, access.workspace.slug, this.policy, git);
  }
}
