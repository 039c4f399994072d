import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { Registry } from 'prom-client';
import { refuseTenants, type TenantNetworks } from '../../http/tenant-guard.js';

export interface MetricsListener {
  /** `http://host:port` */
  url: string;
  close(): Promise<void>;
}

const envelope = (res: import('node:http').ServerResponse, status: number, error: string, headers: Record<string, string> = {}) => {
  const body = JSON.stringify({ success: false, error });
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body).toString(), ...headers });
  res.end(body);
};

/**
 * The operator's own listener for Prometheus (`--metrics-listen`, loopback by default): `GET
 * /metrics` and nothing else. The per-project gauges carry workspace and project names, which
 * are not public, so they are not on the API's port (docs/security.md#metrics-and-the-control-planes-ports).
 */
export async function startMetricsListener(opts: { host: string; port: number; registry: Registry; tenants: TenantNetworks; log: FastifyBaseLogger }): Promise<MetricsListener> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      envelope(res, 404, 'This listener serves GET /metrics only.');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      envelope(res, 405, `Method ${req.method ?? ''} is not allowed here; use GET.`, { allow: 'GET, HEAD' });
      return;
    }
    opts.registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': opts.registry.contentType });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        opts.log.error({ err }, 'metrics could not be collected');
        envelope(res, 500, 'An internal error occurred; it has been logged.');
      },
    );
  });
  refuseTenants(server, opts.tenants, opts.log, 'metrics listener');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(':') ? `[${address}]` : address}:${port.toString()}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => { resolve(); });
      }),
  };
}
