// The gateway of a top-up path whose provider keys are not configured: it takes no money and
// confirms every checkout at once, so a self-hosted install can credit wallets by hand.
import { GatewaySignatureError, type Checkout, type CheckoutRequest, type GatewayEvent, type GatewayName, type PaymentGateway } from './gateway.js';

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
