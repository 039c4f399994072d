import { templateRef, type ProjectRef } from './resolve.js';

/**
 * The two places a project's streams live: `/projects/:project_slug` for projects and
 * `/templates/:template_slug` for template instances (which are projects of another kind).
 */
export interface Scope {
  prefix: string;
  param: 'project_slug' | 'template_slug';
  what: 'project' | 'template instance';
  ref(params: unknown): ProjectRef;
}

const slugIn = (params: unknown, name: string): string => {
  const value = typeof params === 'object' && params !== null ? (params as Record<string, unknown>)[name] : undefined;
  return typeof value === 'string' ? value : '';
};

export const SCOPES: readonly Scope[] = [
  { prefix: '/api/workspaces/:slug/projects/:project_slug', param: 'project_slug', what: 'project', ref: (p) => slugIn(p, 'project_slug') },
  { prefix: '/api/workspaces/:slug/templates/:template_slug', param: 'template_slug', what: 'template instance', ref: (p) => templateRef(slugIn(p, 'template_slug')) },
];
