import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { AppError, invalid } from '../../domain/errors.js';
import { exactMinor, floorMinor, isCurrency, microsPerMinor, minorDigits, minorPerMajor, Q_PER_MICRO, rateQ, scaledNumber } from '../../domain/money.js';
import type { PaymentRow, Usage, Wallet as WalletRow } from '../../store/repositories/index.js';
import type { StoreOf } from '../../store/db.js';
import type { Access } from '../../domain/access.js';
import type { Late } from '../../domain/late.js';
import { GATEWAY_SETTINGS, GatewayError, type GatewayName, type PaymentGateway, type WebhookHeaders } from './gateways/gateway.js';
import { meterable } from './meter.js';
import type { BillingPolicy } from './policy.js';
import type { Payment, PaymentPage, Topup, TransactionPage, UsageLine, Wallet, WalletUsage } from './wallet.schema.js';

/** What a webhook delivery did: the route answers 200 for all of them (a gateway retries anything else). */
export type WebhookOutcome = 'credited' | 'failed' | 'ignored' | 'duplicate' | 'mismatch' | 'unknown' | 'settled';

/** The leader's billing worker, as the wallet sees it. */
export interface CreditListener {
  credited(workspaceId: string): void;
}

/** No leader in this process: its billing worker finds the credit at its next pass. */
export const noCreditListener: CreditListener = { credited: () => undefined };

/** The payment gateway of each top-up path (`--stripe-*`, `--paystack-*`, or the sandbox with `--payments sandbox`); a path without one answers 503. */
export type PaymentGateways = Partial<Record<GatewayName, PaymentGateway>>;

/** How credit comes on this installation: the first top-up path that has a gateway, or the operator when none has. */
function topupHint(gateways: PaymentGateways): string {
  if (gateways.gatewaya !== undefined) return 'top it up with POST /api/workspaces/:slug/wallet/topup/gatewaya {"amount": 10} (an owner or admin)';
  if (gateways.gatewayb !== undefined) return 'top it up with POST /api/workspaces/:slug/wallet/topup/gatewayb {"amount": 1000} (an owner or admin)';
  return 'this installation takes no top-ups (no payment gateway is configured): ask its operator for credit (slipway admin grant-credit)';
}

/**
 * The wallet of a workspace (docs/billing.md): its balance and ledger, usage, top-ups through the
 * payment gateways and their webhooks. Money moves only inside one store transaction with its
 * ledger row (WalletRepository.post).
 */
export class WalletService {
  constructor(
    private readonly store: StoreOf<'wallets' | 'billing' | 'payments'>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    private readonly policy: BillingPolicy,
    private readonly gateways: PaymentGateways,
    /** `--public-url`: where a gateway's checkout sends the payer back; empty: nowhere */
    private readonly publicUrl: string,
    /** told when a credit may have brought a workspace back above 0: the leader's billing worker resumes its work */
    private readonly billing: Late<CreditListener>,
  ) {}

  /** The provider of a top-up path; 503 naming the settings when the operator configured none (and the sandbox is off). */
  gateway(name: GatewayName): PaymentGateway {
    const configured = this.gateways[name];
    if (configured !== undefined) return configured;
    throw new AppError(
      'UNAVAILABLE',
      `Top-ups through ${name} are not available on this installation: its operator has configured no payment gateway for it (${GATEWAY_SETTINGS[name]}) and has not turned on the sandbox (--payments sandbox).`,
    );
  }

  async get(access: Access): Promise<Wallet> {
    return this.view(await this.wallet(access.workspace.id));
  }

  async setAlertThreshold(access: Access, threshold: number): Promise<{ threshold: number }> {
    await this.store.repos.wallets.setAlertThreshold(access.workspace.id, threshold, iso(this.clock.now()));
    return { threshold };
  }

  /** balance − unbilled usage, micro-units */
  async availableMicros(workspaceId: string): Promise<number> {
    const wallet = await this.wallet(workspaceId);
    return wallet.balance_micros - (await this.store.repos.billing.unbilled(workspaceId));
  }

  /** Paid work (deploys, databases) needs a positive available balance: 402 otherwise. */
  async requireFunds(workspaceId: string): Promise<void> {
    if ((await this.availableMicros(workspaceId)) <= 0) {
      throw new AppError('PAYMENT_REQUIRED', `The workspace wallet has no credit left; ${topupHint(this.gateways)}, then try again.`);
    }
  }

  async transactions(access: Access, page: number, limit: number): Promise<TransactionPage> {
    const wallet = await this.wallet(access.workspace.id);
    const { rows, total } = await this.store.repos.wallets.ledger(access.workspace.id, limit, (page - 1) * limit);
    const c = wallet.currency;
    return {
      transactions: rows.map((r) => ({ id: r.id, type: r.type, amount: exactMinor(r.amount_micros, c), balance_after: exactMinor(r.balance_after_micros, c), description: r.description, created_at: r.created_at })),
      total,
      page,
      limit,
    };
  }

  async payments(access: Access, page: number, limit: number): Promise<PaymentPage> {
    const { rows, total } = await this.store.repos.payments.page(access.workspace.id, limit, (page - 1) * limit);
    return { payments: rows.map(paymentView), total, page, limit };
  }

  /** The current calendar month (UTC): usage per resource, prices, total and the projection to its end. */
  async usage(access: Access): Promise<WalletUsage> {
    const wallet = await this.wallet(access.workspace.id);
    const c = wallet.currency;
    const now = this.clock.now();
    const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    const period = iso(start).slice(0, 7);
    const rows = await this.store.repos.billing.usage(access.workspace.id, period, iso(start));
    const { prices } = this.policy;
    const perMinute = (nanos: bigint) => exactMinor(Number(nanos) / 1000, c);
    const resources = rows.map((u) => usageLine(u, c)).sort((a, b) => b.cost - a.cost || a.name.localeCompare(b.name));
    const total = exactMinor(rows.reduce((sum, u) => sum + u.amount_micros, 0), c);
    // at the current rate: what runs now, for every minute left in the month
    const rate = await this.currentRateMicros(access.workspace.id);
    const minutesLeft = Math.max(0, Math.floor((end.getTime() - now.getTime()) / 60_000));
    return {
      period,
      period_start: iso(start),
      period_end: iso(end),
      currency: c,
      unit_prices: { vcpu_minute: perMinute(prices.vcpuMinute), gib_minute: perMinute(prices.gibMinute), database_gib_minute: perMinute(prices.databaseGibMinute) },
      resources,
      total,
      projected_total: round4(total + exactMinor(rate * minutesLeft, c)),
    };
  }

  /**
   * A top-up through `gateway`: a pending payment at the gateway, answered with its checkout URL
   * (the sandbox, when the operator turned it on, confirms at once and credits in the same call).
   * `amount` is in major units for gatewaya, in minor units for gatewayb, with no more decimals
   * than that (checked exactly).
   */
  async topup(access: Access, gatewayName: GatewayName, input: { amount: number; currency?: string | undefined }): Promise<Topup> {
    // Off (no keys, no sandbox): refused before anything is checked or written.
    const gateway = this.gateway(gatewayName);
    const wallet = await this.wallet(access.workspace.id);
    const currency = (input.currency ?? wallet.currency).toUpperCase();
    if (!isCurrency(currency)) throw invalid(`currency: "${input.currency ?? ''}" is not an ISO 4217 currency code; this wallet holds ${wallet.currency}.`);
    if (currency !== wallet.currency) throw invalid(`currency: this wallet holds ${wallet.currency}; top it up in ${wallet.currency}, not ${currency}.`);
    const digits = minorDigits(currency);
    const perMajor = minorPerMajor(currency);
    // Exactly, with no floating-point rounding: 0.999999999 is refused, never credited as 1.00.
    const scaled = scaledNumber(input.amount, gatewayName === 'gatewaya' ? digits : 0);
    if (scaled === null) {
      throw invalid(
        gatewayName === 'gatewaya'
          ? `amount: gatewaya takes major units of ${currency} with at most ${digits.toString()} decimals (10 = 10.00 ${currency}); got ${input.amount.toString()}.`
          : `amount: gatewayb takes a whole number of minor units of ${currency} (1000 = ${(1000 / perMajor).toFixed(digits)} ${currency}); got ${input.amount.toString()}.`,
      );
    }
    const { topupMin, topupMax } = this.policy;
    if (scaled < BigInt(topupMin) || scaled > BigInt(topupMax)) {
      const range = gatewayName === 'gatewaya' ? `${(topupMin / perMajor).toString()} to ${(topupMax / perMajor).toString()} (major units)` : `${topupMin.toString()} to ${topupMax.toString()} (minor units)`;
      throw invalid(`amount: a top-up through ${gatewayName} is ${range} ${currency}; got ${input.amount.toString()}.`);
    }
    const amountMinor = Number(scaled);
    const now = iso(this.clock.now());
    const payment: PaymentRow = {
      id: this.ids.id(),
      workspace_id: access.workspace.id,
      gateway: gatewayName,
      provider: gateway.provider,
      reference: null,
      amount: amountMinor,
      currency,
      status: 'pending',
      checkout_url: null,
      failure_reason: null,
      created_by: access.caller.user.id,
      created_at: now,
      updated_at: now,
      completed_at: null,
    };
    await this.store.repos.payments.insert(payment);
    let checkout;
    try {
      checkout = await gateway.createCheckout({
        paymentId: payment.id,
        amountMinor,
        currency,
        email: access.caller.user.email,
        description: `Slipway credit for workspace ${access.workspace.slug}`,
        returnUrl: this.publicUrl,
      });
    } catch (err) {
      const reason = err instanceof GatewayError ? err.message : 'the gateway could not be reached';
      await this.store.repos.payments.settle(payment.id, 'failed', iso(this.clock.now()), reason);
      throw new AppError('BAD_GATEWAY', `The payment could not be started: ${reason}`);
    }
    await this.store.repos.payments.opened(payment.id, checkout.reference, checkout.checkoutUrl, iso(this.clock.now()));
    let status: PaymentRow['status'] = 'pending';
    if (checkout.confirmed) {
      await this.credit({ ...payment, reference: checkout.reference }, 'sandbox confirmation');
      status = 'succeeded';
    }
    return { payment_id: payment.id, status, checkout_url: checkout.checkoutUrl, amount: input.amount, currency, gateway: gatewayName, provider: gateway.provider };
  }

  /**
   * A payment gateway's webhook delivery. The signature is checked against the raw body first
   * (GatewaySignatureError → 401, nothing recorded); then the event is claimed by its id, so a
   * replay does nothing; a success credits its pending payment once, if amount and currency
   * match it (otherwise the payment is `failed`).
   */
  async receiveWebhook(gatewayName: GatewayName, rawBody: Buffer, headers: WebhookHeaders): Promise<WebhookOutcome> {
    const gateway = this.gateway(gatewayName);
    const event = gateway.parseWebhook(rawBody, headers);
    const { payments } = this.store.repos;
    const at = iso(this.clock.now());
    if (!(await payments.claimEvent(gatewayName, event.eventId, at))) return 'duplicate';
    const record = async (paymentId: string | null, outcome: WebhookOutcome) => {
      await payments.eventOutcome(gatewayName, event.eventId, paymentId, outcome);
      return outcome;
    };
    if (event.kind === 'ignored' || event.reference === null) return record(null, 'ignored');
    const payment = await payments.byReference(gatewayName, event.reference);
    if (payment === undefined) return record(null, 'unknown');
    if (payment.status !== 'pending') return record(payment.id, 'settled');
    if (event.kind === 'failed') {
      await payments.settle(payment.id, 'failed', at, 'the gateway reported the payment as failed or expired');
      return record(payment.id, 'failed');
    }
    if (event.amountMinor !== payment.amount || event.currency !== payment.currency) {
      const paid = `${event.amountMinor === null ? '?' : event.amountMinor.toString()} ${event.currency ?? '?'}`;
      await payments.settle(payment.id, 'failed', at, `the gateway confirmed ${paid} (minor units) where ${payment.amount.toString()} ${payment.currency} was asked: not credited`);
      return record(payment.id, 'mismatch');
    }
    const credited = await this.credit(payment, `event ${event.eventId}`);
    return record(payment.id, credited ? 'credited' : 'settled');
  }

  /**
   * Credits a pending payment: the payment settles, the balance rises and the ledger row is
   * written in one transaction; false when it was no longer pending (credited by another delivery).
   */
  private async credit(payment: PaymentRow, why: string): Promise<boolean> {
    const at = iso(this.clock.now());
    const credited = await this.store.transaction(async (tx) => {
      if (!(await tx.payments.settle(payment.id, 'succeeded', at))) return false;
      await tx.wallets.post({
        id: this.ids.id(),
        workspaceId: payment.workspace_id,
        type: 'topup',
        amountMicros: payment.amount * microsPerMinor(payment.currency),
        description: `Top-up through ${payment.gateway} (${payment.provider}), ${why}`,
        reference: `payment:${payment.id}`,
        at,
      });
      return true;
    });
    if (credited) this.billing.get().credited(payment.workspace_id);
    return credited;
  }

  /** What runs now costs per minute, micro-units (the projection's rate). */
  private async currentRateMicros(workspaceId: string): Promise<number> {
    const { prices } = this.policy;
    let q = 0n;
    for (const r of await this.store.repos.billing.running(workspaceId)) q += rateQ(meterable(r), prices);
    return Number(q) / Number(Q_PER_MICRO);
  }

  private async wallet(workspaceId: string): Promise<WalletRow> {
    const wallet = await this.store.repos.wallets.get(workspaceId);
    if (wallet === undefined) throw new Error(`workspace ${workspaceId} has no wallet`);
    return wallet;
  }

  private async view(wallet: WalletRow): Promise<Wallet> {
    const c = wallet.currency;
    const unbilled = await this.store.repos.billing.unbilled(wallet.workspace_id);
    const graceMs = this.policy.graceMs;
    const suspendsAt = wallet.empty_since === null ? null : iso(new Date(Date.parse(wallet.empty_since) + graceMs));
    return {
      balance: floorMinor(wallet.balance_micros, c),
      currency: c,
      alert_threshold: wallet.alert_threshold,
      unbilled: exactMinor(unbilled, c),
      available: floorMinor(wallet.balance_micros - unbilled, c),
      state: wallet.alerts_sent.has('suspended') ? 'suspended' : wallet.empty_since === null ? 'active' : 'grace',
      suspends_at: suspendsAt,
    };
  }
}

const round4 = (n: number): number => Math.round(n * 10_000) / 10_000;

function usageLine(u: Usage, currency: string): UsageLine {
  return {
    resource_id: u.resource_id,
    resource_kind: u.resource_kind,
    name: u.resource_name,
    minutes: u.minutes,
    quantities: { vcpu_minutes: u.vcpu_milli_minutes / 1000, gib_minutes: u.ram_milli_minutes / 1000, database_gib_minutes: round4(u.db_mib_minutes / 1024) },
    cost: exactMinor(u.amount_micros, currency),
  };
}

function paymentView(p: PaymentRow): Payment {
  return {
    id: p.id,
    gateway: p.gateway,
    provider: p.provider,
    status: p.status,
    amount: p.amount,
    currency: p.currency,
    checkout_url: p.checkout_url,
    failure_reason: p.failure_reason,
    created_at: p.created_at,
    completed_at: p.completed_at,
  };
}
