import type { Clock, Random } from '../../domain/clock.js';
import { NginxDriver, type NginxDriverOptions } from './nginx.driver.js';
import { nginxBinary, NginxMissingError } from './nginx.process.js';
import { NodeProxyDriver, type NodeProxyOptions } from './node-proxy.driver.js';
import type { AcmeChallenges } from './acme-challenges.js';
import { silentLog, type ListenAddress, type RouterDriver, type RouterLog, type TlsOptions } from './router.js';

export { RouteTable, normaliseHost, type Route, type Upstream, type ProjectRoutes } from './route-table.js';
export { formatAddress, silentLog, type ListenAddress, type RouterDriver, type RouterLog, type TlsCertificate, type TlsOptions } from './router.js';
export { AcmeChallenges, ACME_CHALLENGE_PATH } from './acme-challenges.js';
export { checkCertificate } from './tls-certificates.js';
export { NginxDriver, type NginxDriverOptions } from './nginx.driver.js';
export { NginxMissingError, findNginx } from './nginx.process.js';
export { NodeProxyDriver, type NodeProxyOptions } from './node-proxy.driver.js';

/** `auto`: nginx where the binary exists, the Node proxy otherwise (docs/decisions.md#router). */
export type RouterDriverChoice = 'auto' | 'nginx' | 'node';

type Shared = 'listen' | 'log' | 'scheme' | 'tls' | 'challenges';

export interface RouterConfig {
  driver: RouterDriverChoice;
  listen: ListenAddress;
  /** nginx's own directory, e.g. `data/router` */
  nginxDir: string;
  /** default: found on PATH or in /usr/sbin */
  nginxBinary?: string;
  scheme?: 'http' | 'https';
  /** the HTTPS listener (ACME on); absent: nothing listens for TLS */
  tls?: TlsOptions;
  /** HTTP-01 answers the router serves on its plain listener (ACME on) */
  challenges?: AcmeChallenges;
  log?: RouterLog;
  random?: Random;
  /** the nginx driver's clock (default: the system's) */
  clock?: Clock;
  /** tuning of either driver (timeouts, workers, access log) */
  nginx?: Omit<NginxDriverOptions, Shared | 'dir' | 'binary' | 'random' | 'clock'>;
  node?: Omit<NodeProxyOptions, Shared>;
}

/**
 * The data plane the configuration asks for. `nginx` insists (start() fails with a clear message
 * when nginx is absent); `auto` falls back to the Node proxy and says so.
 */
export function createRouterDriver(cfg: RouterConfig): RouterDriver {
  const log = cfg.log ?? silentLog;
  switch (cfg.driver) {
    case 'node':
      return nodeDriver(cfg, log);
    case 'nginx':
      return nginxDriver(cfg, nginxBinary(cfg.nginxBinary) ?? cfg.nginxBinary, log);
    case 'auto': {
      const binary = nginxBinary(cfg.nginxBinary);
      if (binary !== undefined) return nginxDriver(cfg, binary, log);
      log.warn({ reason: new NginxMissingError(cfg.nginxBinary).message }, 'router: nginx not found, using the built-in Node proxy (about a third of nginx throughput)');
      return nodeDriver(cfg, log);
    }
  }
}

function nodeDriver(cfg: RouterConfig, log: RouterLog): NodeProxyDriver {
  return new NodeProxyDriver({ ...cfg.node, listen: cfg.listen, scheme: cfg.scheme ?? 'http', ...acmeOptions(cfg), log });
}

function nginxDriver(cfg: RouterConfig, binary: string | undefined, log: RouterLog): NginxDriver {
  return new NginxDriver({
    ...cfg.nginx,
    listen: cfg.listen,
    dir: cfg.nginxDir,
    ...(binary === undefined ? {} : { binary }),
    scheme: cfg.scheme ?? 'http',
    ...acmeOptions(cfg),
    log,
    ...(cfg.random === undefined ? {} : { random: cfg.random }),
    ...(cfg.clock === undefined ? {} : { clock: cfg.clock }),
  });
}

const acmeOptions = (cfg: RouterConfig): { tls?: TlsOptions; challenges?: AcmeChallenges } => ({
  ...(cfg.tls === undefined ? {} : { tls: cfg.tls }),
  ...(cfg.challenges === undefined ? {} : { challenges: cfg.challenges }),
});

/**
 * `--router-listen`: `:8000` (every interface), `127.0.0.1:8000`, `[::1]:8000`, or a bare port.
 */
export function parseListenAddress(text: string): ListenAddress {
  const t = text.trim();
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(t) ?? /^([^:[\]]*):(\d{1,5})$/.exec(t) ?? /^()(\d{1,5})$/.exec(t);
  const port = Number(m?.[2]);
  if (m === null || port > 65535) {
    throw new Error(`The router listen address "${text}" must look like :8000, 127.0.0.1:8000 or [::1]:8000.`);
  }
  return { host: m[1] === undefined || m[1] === '' ? '0.0.0.0' : m[1], port };
}
