import { Catalog, CatalogError, SHIPPED_CATALOG } from '../modules/templates/catalog.js';
import type { Platform } from '../modules/deps.js';
import type { Config } from './config.js';

// The configuration (config.ts: flags, environment, defaults) read into the settings the modules
// are built with. Kept apart from server.ts so that the admin commands load neither the API nor
// the deploy engine.

/** A start that failed for a reason the operator can fix (reported without a stack trace). */
export class StartError extends Error {}

/** The platform-wide settings the services read. */
export function platformSettings(config: Config): Platform {
  return {
    appsDomain: config.appsDomain,
    routerPort: config.routerListen.port,
    startingCredit: config.startingCredit,
    limits: config.limits,
    currency: config.currency,
    domains: { verification: config.domainVerification, dnsServers: config.dnsServers, publicAddresses: config.publicAddresses, maxPerProject: config.maxDomainsPerProject },
    publicUrl: config.publicUrl,
    invitationTokenInResponse: config.invitationTokenInResponse,
    logMaxBytesPerProject: config.logMaxBytesPerProject,
    databases: config.databases,
    templates: loadCatalog(config),
    billing: config.billing,
    notifyAllowPrivate: config.notifyAllowPrivate,
    uptime: config.uptime,
  };
}

/** The shipped template catalog and `--template-catalog`'s entries, every entry checked: a bad one stops the start. */
function loadCatalog(config: Config): Catalog {
  try {
    return Catalog.load([SHIPPED_CATALOG, ...(config.templateCatalog === '' ? [] : [config.templateCatalog])]);
  } catch (err) {
    if (err instanceof CatalogError) throw new StartError(err.message);
    throw err;
  }
}
