import { isIP } from 'node:net';
import { iso } from '../domain/clock.js';
import { conflict, invalid, notFound } from '../domain/errors.js';
import type { Deps } from '../deps.js';
import { resolveProject } from '../projects/resolve.js';
import { isUniqueViolation } from '../store/dialects.js';
import type { DomainsTable } from '../store/schema.js';
import type { Access } from '../tenancy/context.js';

export interface DomainView {
  id: string;
  domain: string;
  verified: boolean;
  created_at: string;
}

const domainView = (row: DomainsTable): DomainView => ({
  id: row.id,
  domain: row.domain,
  verified: row.verified === 1,
  created_at: row.created_at,
});

export const MAX_HOST_LENGTH = 253;
const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * A custom domain as the router will match it: an RFC 1123 host name, lowercased. Each refusal
 * says what to remove, since the usual mistake is pasting a URL (scheme, port, path) or an
 * address. Names under the apps domain are refused: they belong to the projects' default domains.
 */
export function parseHostName(input: string, appsDomain: string): string {
  const refuse = (why: string) => invalid(`"domain" ${why}.`);
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(input)) throw refuse('must be a host name without a scheme such as https://');
  if (input.includes('*')) throw refuse('cannot be a wildcard; wildcard domains are not supported');
  if (/[/?#]/.test(input)) throw refuse('must be a host name without a path');
  if (input.startsWith('[') || isIP(input) === 6 || input.split(':').length > 2) {
    throw refuse('must be a host name, not an IP address');
  }
  if (input.includes(':')) throw refuse('must be a host name without a port');
  if (isIP(input) === 4) throw refuse('must be a host name, not an IP address');
  if (input.endsWith('.')) throw refuse('must not end with a dot');
  // Checked before lowercasing: toLowerCase maps a few non-ASCII letters (the Kelvin sign) to ASCII.
  if (!/^[A-Za-z0-9.-]+$/.test(input)) {
    throw refuse('may contain only letters a-z, digits, hyphens and dots (write internationalized names in their xn-- form)');
  }
  if (input.length > MAX_HOST_LENGTH) throw refuse(`must be at most ${MAX_HOST_LENGTH} characters long`);
  const host = input.toLowerCase();
  const labels = host.split('.');
  if (labels.includes('')) throw refuse('must not contain an empty label (a leading dot or two dots in a row)');
  if (labels.length < 2) throw refuse('must have at least two labels, such as example.com');
  if (labels.some((l) => l.length > 63)) throw refuse('must not have a label longer than 63 characters');
  if (!labels.every((l) => LABEL.test(l))) throw refuse('must not have a label that starts or ends with a hyphen');
  if (/^[0-9]+$/.test(labels[labels.length - 1] ?? '')) throw refuse('must end in a top-level domain that is not all digits');
  const apps = appsDomain.toLowerCase();
  if (host === apps || host.endsWith(`.${apps}`)) {
    throw refuse(`must not be under ${apps}, which is reserved for the default domains of projects`);
  }
  return host;
}

/** Custom domains of projects. A host name belongs to at most one project on the whole platform. */
export class DomainService {
  constructor(
    readonly deps: Deps,
    /** a project's hosts changed: the router must learn them */
    private readonly changed: (projectId: string) => Promise<void> = () => Promise.resolve(),
  ) {}

  async list(access: Access, projectSlug: string): Promise<DomainView[]> {
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const rows = await this.deps.store.db
      .selectFrom('domains')
      .selectAll()
      .where('project_id', '=', project.id)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(domainView);
  }

  /**
   * The unique index on `domains.domain` decides between concurrent adds; the 409 names neither
   * the workspace nor the project holding the name, which may be someone else's.
   */
  async add(access: Access, projectSlug: string, input: { domain: string }): Promise<DomainView> {
    const domain = parseHostName(input.domain, this.deps.platform.appsDomain);
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const row: DomainsTable = {
      id: this.deps.ids.id(),
      project_id: project.id,
      domain,
      verified: 0,
      created_at: iso(this.deps.clock.now()),
    };
    try {
      await this.deps.store.db.insertInto('domains').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`The domain "${domain}" is already in use on this platform.`);
      throw err;
    }
    await this.changed(project.id);
    return domainView(row);
  }

  /** One statement, so that of two concurrent removals only one answers the domain. */
  async remove(access: Access, projectSlug: string, domainId: string): Promise<DomainView> {
    const { db } = this.deps.store;
    const project = await resolveProject(db, access, projectSlug);
    const row = await db
      .deleteFrom('domains')
      .where('id', '=', domainId)
      .where('project_id', '=', project.id)
      .returningAll()
      .executeTakeFirst();
    if (row === undefined) throw notFound('Domain');
    await this.changed(project.id);
    return domainView(row);
  }
}
