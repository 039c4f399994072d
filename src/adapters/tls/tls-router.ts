import type { RouterDriver } from '../router/index.js';
import type { CertificateManager } from './certificate-manager.js';

/**
 * The router driver with the certificate manager around it, so that the orchestrator (which
 * starts, feeds and stops the router) needs no change: the manager starts after the data plane
 * and stops before it, and learns every host from the tables applied.
 */
export function withCertificates(driver: RouterDriver, manager: CertificateManager): RouterDriver {
  const wrapped: RouterDriver = {
    name: driver.name,
    async start() {
      await driver.start();
      try {
        await manager.start();
      } catch (err) {
        await driver.stop();
        throw new Error(`TLS could not start: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
    apply(table) {
      // The manager orders in the background; routing never waits for a CA.
      manager.setHosts(table.routes().map((r) => r.host));
      return driver.apply(table);
    },
    async stop() {
      await manager.stop();
      await driver.stop();
    },
    ...(driver.stage === undefined ? {} : { stage: driver.stage.bind(driver) }),
    address: () => driver.address(),
    tlsAddress: () => driver.tlsAddress?.(),
    setCertificates: (certificates) => driver.setCertificates?.(certificates) ?? Promise.reject(new Error(`The ${driver.name} router does not serve TLS.`)),
  };
  // Only a driver whose data plane can outlive Slipway has release() (the orchestrator asks).
  const release = driver.release?.bind(driver);
  if (release === undefined) return wrapped;
  return {
    ...wrapped,
    async release() {
      await manager.stop();
      await release();
    },
  };
}
