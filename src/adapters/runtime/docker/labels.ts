import type { Labels, Owner, Selector } from '../../../domain/runtime.js';

/**
 * The label keys Slipway puts on what it creates. They are how the orchestrator finds its
 * containers again after a restart and how orphans are recognised, so they never change.
 */
export const LABEL = {
  managedBy: 'slipway.managed-by',
  workspace: 'slipway.workspace',
  project: 'slipway.project',
  deployment: 'slipway.deployment',
  /** the app port inside the container, to find its published host port */
  port: 'slipway.port',
} as const;

export const MANAGED_BY = 'slipway';

/** The caller's labels, then Slipway's own (which the caller cannot override). */
export function withOwner(owner: Partial<Owner> | undefined, labels: Labels | undefined): Record<string, string> {
  const out: Record<string, string> = { ...labels, [LABEL.managedBy]: MANAGED_BY };
  if (owner?.workspace !== undefined) out[LABEL.workspace] = owner.workspace;
  if (owner?.project !== undefined) out[LABEL.project] = owner.project;
  if (owner?.deployment !== undefined) out[LABEL.deployment] = owner.deployment;
  return out;
}

/** The Engine's `label` filter: every entry must match; managed-by is always one of them. */
export function labelFilter(selector: Selector): string[] {
  return Object.entries(withOwner(selector.owner, selector.labels)).map(([k, v]) => `${k}=${v}`);
}

export function isEmptySelector(selector: Selector): boolean {
  const owner = selector.owner ?? {};
  return Object.keys(owner).length === 0 && Object.keys(selector.labels ?? {}).length === 0;
}

export function ownerOf(labels: Labels): Owner | null {
  const workspace = labels[LABEL.workspace];
  const project = labels[LABEL.project];
  const deployment = labels[LABEL.deployment];
  if (workspace === undefined || project === undefined || deployment === undefined) return null;
  return { workspace, project, deployment };
}
