/** A DNS label: what every slug must be, so that it can name networks, hosts and namespaces. */
export const SLUG_PATTERN = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';
const SLUG_RE = new RegExp(SLUG_PATTERN);

export const isSlug = (value: string): boolean => SLUG_RE.test(value);

/**
 * Fixed path segments directly under `/api/workspaces/` (GET /api/workspaces/available-templates
 * is the template catalog): a workspace with such a slug could never be addressed, so none may
 * take one. test/e2e/hardening.test.ts checks that every such route segment is listed here.
 */
export const RESERVED_WORKSPACE_SLUGS: ReadonlySet<string> = new Set(['available-templates']);

/** Project, database and template slugs derive from their name: lowercase, non-alnum → `-`. */
export function slugify(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/g, '');
}
