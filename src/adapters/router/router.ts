import type { ProjectRoutes, RouteTable } from './route-table.js';

/**
 * The seam between Slipway's route table and the data plane that carries the traffic. Every
 * driver passes test/medium/router.conformance.test.ts.
 */

export interface ListenAddress {
  /** an IP address; '0.0.0.0' or '::' for every interface */
  readonly host: string;
  readonly port: number;
}

export type DriverName = 'nginx' | 'node';

/** pino's call shape (`log.info(obj, msg)`), so the composition root can pass its logger as is. */
export interface RouterLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export const silentLog: RouterLog = { info: () => undefined, warn: () => undefined, error: () => undefined };

export interface RouterDriver {
  readonly name: DriverName;

  /**
   * Starts serving, with an empty table (503 for every host) until the first apply(). Resolves
   * once the listen address accepts connections; rejects with a readable reason otherwise.
   */
  start(): Promise<void>;

  /**
   * Routes by `table` from now on. Resolves when every new request is routed by it and the plain
   * HTTP requests that were in flight under an older table have finished (or the driver's drain
   * bound has passed): from then on, replicas absent from `table` may be stopped. Requests are
   * never cut by a switch; WebSockets and long streams keep the replica they started on.
   * Calls are serialised and a burst of them is coalesced: a call may resolve through a later
   * table's switch. Rejects (and keeps the previous routes) when the data plane refuses it.
   */
  apply(table: RouteTable): Promise<void>;

  /**
   * Prepares a coming switch of one project, without changing what is routed: a later apply()
   * whose table gives the project exactly `routes` then takes effect sooner. For drivers whose
   * switch is slow (nginx reloads); `null` drops the stage. Calls are serialised with apply().
   */
  stage?(project: string, routes: ProjectRoutes | null): Promise<void>;

  /** Stops listening and ends what the driver started; idempotent. */
  stop(): Promise<void>;

  /**
   * Stops supervising but leaves the data plane serving its current routes after Slipway exits,
   * for the next start to adopt. Only drivers whose data plane outlives the process have it.
   */
  release?(): Promise<void>;

  /** Where clients reach the router (after start(): the real port when 0 was asked for). */
  address(): ListenAddress;

  /**
   * Replaces the certificates served on the TLS listener (drivers created with `tls`). A host
   * gets HTTPS when the route table serves it and it has a certificate here; any other name,
   * and a client without SNI, fails the TLS handshake. Serialised with apply(); rejects (and
   * keeps the previous certificates) when the data plane refuses one.
   */
  setCertificates?(certificates: readonly TlsCertificate[]): Promise<void>;

  /** Where the TLS listener is (after start(): the real port); undefined without `tls`. */
  tlsAddress?(): ListenAddress | undefined;
}

/** A certificate for one host name, as the router serves it on its TLS listener (SNI). */
export interface TlsCertificate {
  /** normalised like the route table's hosts */
  readonly host: string;
  /** PEM: the leaf certificate first, then its chain */
  readonly certificatePem: string;
  /** PEM private key of the leaf; a secret, never logged */
  readonly privateKeyPem: string;
}

/** The router's HTTPS listener, off unless given (ACME enabled: see docs/router.md "TLS"). */
export interface TlsOptions {
  readonly listen: ListenAddress;
}

/** `127.0.0.1:8000`, `[::]:8000` */
export function formatAddress(a: ListenAddress): string {
  return a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}
