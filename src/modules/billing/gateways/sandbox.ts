// The gateway of a top-up path whose provider keys are not configured, when the operator turned
// the sandbox on (`--payments sandbox`, which `make run` sets): it takes no money and confirms
// every checkout at once. Anyone who may top up a wallet (its owners and admins) then gives it
// credit for free, so it is for development and demos only; every start logs a warning
// (docs/billing.md#sandbox). Off, a path without keys answers 503.
import { GATEWAYS, GatewaySignatureError, type Checkout, type CheckoutRequest, type GatewayEvent, type GatewayName, type PaymentGateway } from './gateway.js';

export type PaymentsMode = 'off' | 'sandbox';

/**
 * The gateway of each top-up path: the configured ones; with the sandbox on, a SandboxGateway for
 * each path without one too (a path with keys keeps its real provider).
 */
export function paymentGateways(configured: Partial<Record<GatewayName, PaymentGateway>>, mode: PaymentsMode): Partial<Record<GatewayName, PaymentGateway>> {
  if (mode === 'off') return { ...configured };
  const out: Partial<Record<GatewayName, PaymentGateway>> = { ...configured };
  for (const name of GATEWAYS) out[name] ??= new SandboxGateway({ name });
  return out;
}

/** The top-up paths that are the sandbox (the start-up warning names them). */
export const sandboxPaths = (gateways: Partial<Record<GatewayName, PaymentGateway>> | undefined): GatewayName[] =>
  GATEWAYS.filter((name) => gateways?.[name]?.provider === 'sandbox');

/** Confirms each checkout immediately (no payment page, no webhooks). */
export class SandboxGateway implements PaymentGateway {
  readonly name: GatewayName;
  readonly provider = 'sandbox' as const;

  constructor(opts: { name: GatewayName }) {
    this.name = opts.name;
  }

  async createCheckout(request: CheckoutRequest): Promise<Checkout> {
    return { reference: `sandbox_${request.paymentId}`, checkoutUrl: null, confirmed: true };
  }

  parseWebhook(): GatewayEvent {
    throw new GatewaySignatureError('The sandbox gateway confirms payments at once and takes no webhooks.');
  }
}
