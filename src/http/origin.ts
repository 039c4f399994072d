import type { FastifyRequest } from 'fastify';

/** A Host header worth echoing back: a DNS name or an IP address (v6 in brackets), with an optional port. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;

/**
 * The API's origin as this request reached it (`https://slipway.example.com`), for the absolute
 * URLs an answer shows when `--public-url` is not set. Fastify believes X-Forwarded-Proto and
 * X-Forwarded-Host only from the proxies of `--trust-proxy`; otherwise the socket and the Host
 * header decide. null when the Host header is missing or not a host name.
 */
export function requestOrigin(req: FastifyRequest): string | null {
  const host = req.host;
  // typed 'http' | 'https', but a trusted proxy's X-Forwarded-Proto may say anything
  const protocol: string = req.protocol;
  if (!HOST.test(host) || (protocol !== 'http' && protocol !== 'https')) return null;
  return `${protocol}://${host.toLowerCase()}`;
}

/**
 * A view whose `webhook_url` is a bare path (no `--public-url`) made absolute under the request's
 * origin: GitHub takes absolute payload URLs only (docs/configuration.md#public-url).
 */
export function withWebhookOrigin<T extends { webhook_url: string | null }>(req: FastifyRequest, view: T): T {
  if (view.webhook_url === null || !view.webhook_url.startsWith('/')) return view;
  const origin = requestOrigin(req);
  return origin === null ? view : { ...view, webhook_url: `${origin}${view.webhook_url}` };
}

/** The same for a project, whose Git connection (if any) carries the webhook URL. */
export function projectWithWebhookOrigin<T extends { git: { webhook_url: string | null } | null }>(req: FastifyRequest, project: T): T {
  return project.git === null ? project : { ...project, git: withWebhookOrigin(req, project.git) };
}
