import { iso } from '../domain/clock.js';
import { conflict, notFound } from '../domain/errors.js';
import type { Deps } from '../deps.js';
import { isUniqueViolation } from '../store/dialects.js';
import type { GitConnectionsTable } from '../store/schema.js';
import type { Access } from '../tenancy/context.js';
import { resolveProject } from './resolve.js';
import { gitView, type GitView } from './views.js';

export interface GitInput {
  repo_full_name: string;
  branch?: string | undefined;
  installation_id?: number | undefined;
  auto_deploy?: boolean | undefined;
  dockerfile_path?: string | undefined;
  root_dir?: string | undefined;
}

export type GitPatch = Partial<GitInput>;

export const GIT_DEFAULTS = { branch: 'main', installation_id: 0, auto_deploy: true, dockerfile_path: 'Dockerfile', root_dir: '' } as const;

/** The Git connection of a project: one per project, shown on the project record. */
export class GitService {
  constructor(private readonly deps: Deps) {}

  async connect(access: Access, projectSlug: string, input: GitInput): Promise<GitView> {
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const now = iso(this.deps.clock.now());
    const row: GitConnectionsTable = {
      project_id: project.id,
      repo_full_name: input.repo_full_name,
      branch: input.branch ?? GIT_DEFAULTS.branch,
      installation_id: input.installation_id ?? GIT_DEFAULTS.installation_id,
      auto_deploy: (input.auto_deploy ?? GIT_DEFAULTS.auto_deploy) ? 1 : 0,
      dockerfile_path: input.dockerfile_path ?? GIT_DEFAULTS.dockerfile_path,
      root_dir: normalizeDir(input.root_dir ?? GIT_DEFAULTS.root_dir),
      created_at: now,
      updated_at: now,
    };
    try {
      await this.deps.store.db.insertInto('git_connections').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict('This project is already connected to a repository; update or remove that connection first.');
      throw err;
    }
    return gitView(row);
  }

  async update(access: Access, projectSlug: string, patch: GitPatch): Promise<GitView> {
    const { db } = this.deps.store;
    const project = await resolveProject(db, access, projectSlug);
    const row = await db.selectFrom('git_connections').selectAll().where('project_id', '=', project.id).executeTakeFirst();
    if (row === undefined) throw notFound('Git connection');
    const next: GitConnectionsTable = {
      ...row,
      ...(patch.repo_full_name === undefined ? {} : { repo_full_name: patch.repo_full_name }),
      ...(patch.branch === undefined ? {} : { branch: patch.branch }),
      ...(patch.installation_id === undefined ? {} : { installation_id: patch.installation_id }),
      ...(patch.auto_deploy === undefined ? {} : { auto_deploy: patch.auto_deploy ? 1 : 0 }),
      ...(patch.dockerfile_path === undefined ? {} : { dockerfile_path: patch.dockerfile_path }),
      ...(patch.root_dir === undefined ? {} : { root_dir: normalizeDir(patch.root_dir) }),
      updated_at: iso(this.deps.clock.now()),
    };
    const { project_id: _id, created_at: _created, ...changes } = next;
    await db.updateTable('git_connections').set(changes).where('project_id', '=', project.id).execute();
    return gitView(next);
  }

  async disconnect(access: Access, projectSlug: string): Promise<GitView> {
    const { db } = this.deps.store;
    const project = await resolveProject(db, access, projectSlug);
    const row = await db.selectFrom('git_connections').selectAll().where('project_id', '=', project.id).executeTakeFirst();
    if (row === undefined) throw notFound('Git connection');
    await db.deleteFrom('git_connections').where('project_id', '=', project.id).execute();
    return gitView(row);
  }
}

/** "app/", "./app" and "app" name one directory; the empty string is the repository root. */
const normalizeDir = (dir: string): string => dir.replace(/^(\.\/)+/, '').replace(/\/+$/, '').replace(/^\.$/, '');
