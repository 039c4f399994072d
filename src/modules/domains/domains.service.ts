import { isIP } from 'node:net';
import { iso, type Clock, type IdSource, type Random } from '../../domain/clock.js';
import { conflict, Duplicate, invalid, notFound } from '../../domain/errors.js';
import { everyInterval } from '../../domain/periodic.js';
import type { DomainPolicy } from './policy.js';
import type { ProjectPolicy } from '../projects/policy.js';
import { resolveProject, type ProjectRef } from '../projects/resolve.js';
import type { DomainRow } from '../../store/repositories/index.js';
import type { StoreOf } from '../../store/db.js';
import type { Access } from '../../domain/access.js';
import type { Domain } from './domains.schema.js';
import { challengeName, challengeValue, OwnershipProof } from './verification.js';

const domainView = (row: DomainRow): Domain => ({
  id: row.id,
  domain: row.domain,
  verified: row.verified === 1,
  verification: row.verified === 1 ? null : { type: 'TXT', name: challengeName(row.domain), value: challengeValue(row.verification_token) },
  verified_at: row.verified_at,
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

/** How many pending domains are asked about at once by the background pass. */
const PASS_CONCURRENCY = 4;

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * How often the background pass asks DNS about a pending claim of this age: every pass in its
 * first hour, then hourly, then daily from its eighth day (POST …/verify asks at any time). A
 * claim nobody proves thus costs a few DNS questions a day, not one a minute forever.
 */
export function askEveryMs(ageMs: number): number {
  if (ageMs < HOUR_MS) return 0;
  return ageMs < 7 * DAY_MS ? HOUR_MS : DAY_MS;
}

/**
 * Whether a pass at `now` asks about a claim made at `created`, the previous pass having run at
 * `previous` (undefined: none yet in this process): when a period of the claim's age has ended
 * since the previous pass.
 */
export function isDue(created: number, now: number, previous: number | undefined): boolean {
  const every = askEveryMs(now - created);
  // no earlier pass here, or the clock went back: ask
  if (every === 0 || previous === undefined || previous > now) return true;
  return Math.floor((now - created) / every) > Math.floor((previous - created) / every);
}

/**
 * Custom domains of projects. A name is routed only once its ownership is proven (verified);
 * a verified name belongs to at most one project on the whole platform (partial unique index),
 * while pending claims do not block its owner: the first claim proven wins.
 */
export class DomainService {
  private readonly proof: OwnershipProof;
  private passing: Promise<void> | null = null;
  /** when this process's previous background pass began (monotonic within the service's clock) */
  private previousPass: number | undefined;

  constructor(
    private readonly store: StoreOf<'projects' | 'domains'>,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly ids: IdSource,
    readonly policy: DomainPolicy,
    /** the apps domain, whose names are the default hosts' and cannot be claimed */
    private readonly hosts: Pick<ProjectPolicy, 'appsDomain'>,
    /** a project's hosts changed: the router must learn them */
    private readonly changed: (projectId: string) => Promise<void> = () => Promise.resolve(),
  ) {
    this.proof = new OwnershipProof(this.policy);
  }

  async list(access: Access, projectSlug: ProjectRef): Promise<Domain[]> {
    const project = await resolveProject(this.store.repos, access, projectSlug);
    return (await this.store.repos.domains.list(project.id)).map(domainView);
  }

  /**
   * The limit, the check for a verified holder and the insert are one transaction (the project
   * row locked on PostgreSQL), so a refused add saves nothing and concurrent adds cannot pass the
   * limit. The unique indexes decide between concurrent adds; a 409 names neither the workspace
   * nor the project holding the name, which may be someone else's. With verification on, the
   * proof is tried at once; the route follows only a verified name.
   */
  async add(access: Access, projectSlug: ProjectRef, input: { domain: string }): Promise<Domain> {
    const domain = parseHostName(input.domain, this.hosts.appsDomain);
    const project = await resolveProject(this.store.repos, access, projectSlug);
    const trusted = this.policy.verification === 'off';
    const now = iso(this.clock.now());
    const row: DomainRow = {
      id: this.ids.id(),
      project_id: project.id,
      domain,
      verified: trusted ? 1 : 0,
      verification_token: this.random.bytes(16).toString('hex'),
      verified_at: trusted ? now : null,
      created_at: now,
    };
    // a name taken meanwhile by a concurrent add: 409 from the repository, in the same words as inUse
    await this.store.transaction(async (tx) => {
      await tx.projects.lock(project.id, { noKey: false });
      const mine = await tx.domains.namesOf(project.id);
      if (mine.includes(domain)) throw conflict(`The domain "${domain}" is already a domain of this project.`);
      const max = this.policy.maxPerProject;
      if (mine.length >= max) {
        throw conflict(`This project already has ${mine.length.toString()} custom domains, the most this platform allows (${max.toString()}); remove one first.`);
      }
      if (await tx.domains.isVerified(domain)) throw conflict(`The domain "${domain}" is already in use on this platform.`);
      await tx.domains.insert(row);
    });
    const settled = trusted ? row : await this.tryVerify(row);
    if (settled.verified === 1) await this.route(project.id);
    return domainView(settled);
  }

  /**
   * Asks DNS again for one pending domain (after its TXT record was published). Answers the
   * record, verified or still pending; 409 when another project proved the name first.
   */
  async verify(access: Access, projectSlug: ProjectRef, domainId: string): Promise<Domain> {
    const { repos } = this.store;
    const project = await resolveProject(repos, access, projectSlug);
    const row = await repos.domains.find(project.id, domainId);
    if (row === undefined) throw notFound('Domain');
    if (row.verified === 1) return domainView(row);
    const settled = await this.tryVerify(row);
    if (settled.verified === 1) {
      await this.route(project.id);
    } else if (await this.heldElsewhere(row)) {
      throw conflict(`The domain "${row.domain}" has been verified by another project on this platform; it cannot be verified here.`);
    }
    return domainView(settled);
  }

  /** One statement, so that of two concurrent removals only one answers the domain. */
  async remove(access: Access, projectSlug: ProjectRef, domainId: string): Promise<Domain> {
    const { repos } = this.store;
    const project = await resolveProject(repos, access, projectSlug);
    const row = await repos.domains.remove(project.id, domainId);
    if (row === undefined) throw notFound('Domain');
    if (row.verified === 1) await this.route(project.id);
    return domainView(row);
  }

  /**
   * One background pass over the pending domains: each one due (askEveryMs) is asked about again
   * (with verification off, each is trusted now). Passes do not overlap.
   */
  verifyPending(): Promise<void> {
    this.passing ??= this.pass().finally(() => {
      this.passing = null;
    });
    return this.passing;
  }

  /** Runs verifyPending now and every `everyMs`; the returned function stops it (and waits for a pass in progress). */
  startBackground(everyMs: number, onError: (err: unknown) => void): () => Promise<void> {
    return everyInterval(() => this.verifyPending(), everyMs, onError);
  }

  private async pass(): Promise<void> {
    const now = this.clock.now().getTime();
    const previous = this.previousPass;
    this.previousPass = now;
    const pending = await this.store.repos.domains.pending();
    // with verification off nothing is asked: every claim is trusted at once
    const queue = this.policy.verification === 'off' ? [...pending] : pending.filter((row) => isDue(Date.parse(row.created_at), now, previous));
    const worker = async () => {
      for (let row = queue.shift(); row !== undefined; row = queue.shift()) {
        const settled = this.policy.verification === 'off' ? await this.markVerified(row) : await this.tryVerify(row);
        if (settled.verified === 1) await this.route(row.project_id);
      }
    };
    await Promise.all(Array.from({ length: Math.min(PASS_CONCURRENCY, queue.length) }, worker));
  }

  /**
   * The row verified when DNS proves it: its TXT record, or (public addresses configured) the
   * name resolving to this installation while no other project claims it. Otherwise as it was.
   */
  private async tryVerify(row: DomainRow): Promise<DomainRow> {
    if (await this.heldElsewhere(row)) return row;
    const { txt, here } = await this.proof.check(row.domain, row.verification_token);
    if (!txt && !(here && !(await this.claimedElsewhere(row)))) return row;
    return this.markVerified(row);
  }

  /** The partial unique index refuses a second verified holder: then the row stays pending. */
  private async markVerified(row: DomainRow): Promise<DomainRow> {
    const at = iso(this.clock.now());
    try {
      return (await this.store.repos.domains.markVerified(row.id, at)) ? { ...row, verified: 1, verified_at: at } : row;
    } catch (err) {
      if (err instanceof Duplicate) return row;
      throw err;
    }
  }

  private heldElsewhere(row: DomainRow): Promise<boolean> {
    return this.store.repos.domains.isVerified(row.domain, row.id);
  }

  private claimedElsewhere(row: DomainRow): Promise<boolean> {
    return this.store.repos.domains.claimedByOther(row.domain, row.project_id);
  }

  /**
   * The router learns the project's hosts. The row is written already: a router that refuses
   * the change does not undo it (the engine logs the failure and its reconciler converges).
   */
  private async route(projectId: string): Promise<void> {
    await this.changed(projectId).catch(() => undefined);
  }
}
