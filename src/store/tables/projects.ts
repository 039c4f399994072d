import type { Generated, Selectable } from 'kysely';
import type { ProjectRecord } from '../../domain/project.js';

export type { ProjectStatus } from '../../domain/project.js';

/** The store keeps a project's record as the domain describes it (kind and the template fields have defaults). */
export interface ProjectsTable extends Omit<ProjectRecord, 'kind' | 'template_name' | 'volumes' | 'command' | 'health_path'> {
  kind: Generated<ProjectRecord['kind']>;
  template_name: Generated<string | null>;
  volumes: Generated<string | null>;
  command: Generated<string | null>;
  health_path: Generated<string | null>;
}

export type ProjectRow = Selectable<ProjectsTable>;

export interface GitConnectionsTable {
  project_id: string;
  repo_full_name: string;
  branch: string;
  /** bigint: pg returns it as a string */
  installation_id: string | number;
  auto_deploy: number;
  dockerfile_path: string;
  root_dir: string;
  created_at: string;
  updated_at: string;
  /** the random id in the connection's delivery URL, /api/webhooks/github/<webhook_id> (hex) */
  webhook_id: string | null;
  /** sealed (context `git-webhook:<project_id>:<webhook_id>`); null: not made yet (connections older than per-connection secrets) */
  webhook_secret: string | null;
}

export interface ProjectsTables {
  projects: ProjectsTable;
  git_connections: GitConnectionsTable;
}
