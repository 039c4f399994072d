/**
 * What a project shows (docs/decisions.md#project-status): derived from its deployments, except
 * `crashed` (set by the reconciler) and `suspended` (set by billing).
 */
export const PROJECT_STATUSES = ['pending', 'building', 'deploying', 'running', 'stopped', 'failed', 'crashed', 'suspended'] as const;
export type ProjectStatus = (typeof PROJECT_STATUSES)[number];

/** A project as the store keeps it. */
export interface ProjectRecord {
  id: string;
  workspace_id: string;
  name: string;
  slug: string;
  port: number;
  replicas: number;
  /** vCPU as a decimal string, e.g. "0.5" */
  cpu: string;
  /** GiB as a decimal string, e.g. "0.5" */
  ram: string;
  status: ProjectStatus;
  created_at: string;
  updated_at: string;
  /** the default host is `<host_label>.<apps domain>`; unique platform-wide (`<project>-<workspace>` when the project was made) */
  host_label: string;
  /** `project`, or `template`: an instance of a catalog entry (docs/templates.md), served by the template routes */
  kind: ProjectKind;
  /** an instance's catalog key; null for projects */
  template_name: string | null;
  /** an instance's data paths, JSON array of container paths (a named volume each); null: none */
  volumes: string | null;
  /** an instance's command, JSON argument vector replacing its image's; null: the image's own */
  command: string | null;
  /** an instance's readiness path: a new container takes traffic once it answers there below 400; null: any answer on `/` */
  health_path: string | null;
}

export const PROJECT_KINDS = ['project', 'template'] as const;
export type ProjectKind = (typeof PROJECT_KINDS)[number];
