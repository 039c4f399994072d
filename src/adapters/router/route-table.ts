import { conflict, invalid } from '../../domain/errors.js';

/**
 * Slipway's route table: which host names are served, and by which running replicas. A value:
 * every change returns a new table (or the same one when nothing changed), so a driver can keep
 * the snapshot it last applied and compare `version`s. No I/O here.
 */

/** One replica of the current deployment, as the router reaches it (docs/decisions.md#upstream-addressing). */
export interface Upstream {
  readonly host: string;
  readonly port: number;
}

export interface Route {
  /** normalised: lowercase, no port, no trailing dot */
  readonly host: string;
  readonly project: string;
  /** the healthy replicas in a stable order; empty when nothing runs (the router answers 503) */
  readonly upstreams: readonly Upstream[];
}

export interface ProjectRoutes {
  readonly hosts: readonly string[];
  readonly upstreams: readonly Upstream[];
}

interface Entry {
  readonly hosts: ReadonlySet<string>;
  readonly upstreams: readonly Upstream[];
}

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const IPV6 = /^[0-9a-f:.]+$/;

/**
 * The host a request names, as routes are keyed: `App.Example.com:8000` → `app.example.com`.
 * An IPv6 literal keeps its brackets (`[::1]:80` → `[::1]`). undefined for an absent header.
 */
export function normaliseHost(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  let host = header.trim().toLowerCase();
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end === -1 ? host : host.slice(0, end + 1);
  }
  const colon = host.indexOf(':');
  if (colon !== -1) host = host.slice(0, colon);
  if (host.endsWith('.')) host = host.slice(0, -1);
  return host;
}

/** RFC 1123 host name (what the domains service accepts), after normalisation. */
export function isRoutableHost(host: string): boolean {
  if (host.length === 0 || host.length > 253 || IPV4.test(host)) return false;
  return host.split('.').every((label) => LABEL.test(label));
}

function routableHost(raw: string): string {
  const host = normaliseHost(raw) ?? '';
  if (!isRoutableHost(host)) throw invalid(`The host name "${raw}" is not a valid DNS name (RFC 1123) and cannot be routed.`);
  return host;
}

/**
 * Upstream hosts end up in the nginx config, so only addresses and DNS names pass: nothing that
 * could close a directive.
 */
function validUpstream(u: Upstream): Upstream {
  const host = u.host.toLowerCase();
  const ok = IPV4.test(host) || (host.includes(':') && IPV6.test(host)) || isRoutableHost(host);
  if (!ok) throw invalid(`The upstream host "${u.host}" is not an IP address or a DNS name.`);
  if (!Number.isInteger(u.port) || u.port < 1 || u.port > 65535) {
    throw invalid(`The upstream port ${String(u.port)} of ${u.host} must be an integer from 1 to 65535.`);
  }
  return { host, port: u.port };
}

/** Validated, duplicates dropped, order kept (round-robin follows it). */
function cleanUpstreams(list: readonly Upstream[]): readonly Upstream[] {
  const seen = new Set<string>();
  const out: Upstream[] = [];
  for (const raw of list) {
    const u = validUpstream(raw);
    const key = upstreamKey(u);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(u);
  }
  return Object.freeze(out);
}

/** `127.0.0.1:8080`, `[::1]:8080`: the form nginx's `server` directive and logs use. */
export function upstreamKey(u: Upstream): string {
  return u.host.includes(':') ? `[${u.host}]:${u.port}` : `${u.host}:${u.port}`;
}

/** The same replicas in the same order (round-robin follows it). */
export const sameUpstreams = (a: readonly Upstream[], b: readonly Upstream[]): boolean =>
  a.length === b.length && a.every((u, i) => upstreamKey(u) === upstreamKey(b[i] ?? { host: '', port: 0 }));

export class RouteTable {
  /** Incremented by every change that alters what is routed; equal versions of one lineage route alike. */
  readonly version: number;
  private readonly projects: ReadonlyMap<string, Entry>;
  /** host → project */
  private readonly owners: ReadonlyMap<string, string>;
  private sorted: readonly Route[] | undefined;

  private constructor(version: number, projects: ReadonlyMap<string, Entry>, owners: ReadonlyMap<string, string>) {
    this.version = version;
    this.projects = projects;
    this.owners = owners;
  }

  static empty(): RouteTable {
    return new RouteTable(0, new Map(), new Map());
  }

  /** Every served host, sorted by host name. */
  routes(): readonly Route[] {
    this.sorted ??= Object.freeze(
      [...this.owners.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([host, project]) => Object.freeze({ host, project, upstreams: this.projects.get(project)?.upstreams ?? [] })),
    );
    return this.sorted;
  }

  /** The route for a Host header (any case, with or without port); undefined when no project serves it. */
  lookup(hostHeader: string | undefined): Route | undefined {
    const host = normaliseHost(hostHeader);
    if (host === undefined) return undefined;
    const project = this.owners.get(host);
    if (project === undefined) return undefined;
    return { host, project, upstreams: this.projects.get(project)?.upstreams ?? [] };
  }

  project(project: string): ProjectRoutes | undefined {
    const e = this.projects.get(project);
    return e === undefined ? undefined : { hosts: [...e.hosts].sort(), upstreams: e.upstreams };
  }

  /**
   * Replaces a project's hosts and upstreams at once (a deployment that takes over, a project
   * whose domains changed). A host another project serves is a conflict: host names are unique
   * across the platform (docs/decisions.md#host-names), so this is a bug upstream of the router.
   */
  setProject(project: string, routes: ProjectRoutes): RouteTable {
    const hosts = new Set(routes.hosts.map(routableHost));
    for (const h of hosts) this.assertFree(h, project);
    const upstreams = cleanUpstreams(routes.upstreams);
    const before = this.projects.get(project);
    if (before !== undefined && sameUpstreams(before.upstreams, upstreams) && sameSet(before.hosts, hosts)) return this;
    return this.with(project, { hosts, upstreams });
  }

  /**
   * setProject as the store decides it: the store holds each host name once, so a host another
   * project serves in this table is held there stale (that project was deleted, or gave the name
   * up, and the table was not told). It moves to `project` instead of being refused: the
   * reconciler converges on what the store says.
   */
  assign(project: string, routes: ProjectRoutes): RouteTable {
    const stale = routes.hosts.map(routableHost).filter((host) => {
      const owner = this.owners.get(host);
      return owner !== undefined && owner !== project;
    });
    return stale.reduce<RouteTable>((table, host) => table.removeHost(host), this).setProject(project, routes);
  }

  /** Swaps the replicas a project's hosts go to (a new deployment, a replica that became unhealthy). */
  setUpstreams(project: string, upstreams: readonly Upstream[]): RouteTable {
    const clean = cleanUpstreams(upstreams);
    const before = this.projects.get(project);
    if (before !== undefined && sameUpstreams(before.upstreams, clean)) return this;
    return this.with(project, { hosts: before?.hosts ?? new Set(), upstreams: clean });
  }

  /** Adds a host to a project (its default domain, a custom domain). */
  addHost(project: string, rawHost: string): RouteTable {
    const host = routableHost(rawHost);
    this.assertFree(host, project);
    const before = this.projects.get(project);
    if (before?.hosts.has(host) === true) return this;
    return this.with(project, { hosts: new Set([...(before?.hosts ?? []), host]), upstreams: before?.upstreams ?? [] });
  }

  /** Stops serving one host (a custom domain deleted); the router then answers 503 for it. */
  removeHost(rawHost: string): RouteTable {
    const host = normaliseHost(rawHost) ?? '';
    const project = this.owners.get(host);
    if (project === undefined) return this;
    const before = this.projects.get(project);
    const hosts = new Set(before?.hosts ?? []);
    hosts.delete(host);
    return this.with(project, { hosts, upstreams: before?.upstreams ?? [] });
  }

  /** Forgets a project: all its hosts answer 503 (project deleted). */
  removeProject(project: string): RouteTable {
    if (!this.projects.has(project)) return this;
    const projects = new Map(this.projects);
    projects.delete(project);
    const owners = new Map([...this.owners].filter(([, p]) => p !== project));
    return new RouteTable(this.version + 1, projects, owners);
  }

  private assertFree(host: string, project: string): void {
    const owner = this.owners.get(host);
    if (owner !== undefined && owner !== project) {
      throw conflict(`The host name ${host} is already routed to another project.`);
    }
  }

  private with(project: string, entry: Entry): RouteTable {
    const projects = new Map(this.projects);
    projects.set(project, Object.freeze({ hosts: new Set(entry.hosts), upstreams: entry.upstreams }));
    const owners = new Map([...this.owners].filter(([, p]) => p !== project));
    for (const h of entry.hosts) owners.set(h, project);
    return new RouteTable(this.version + 1, projects, owners);
  }
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}
