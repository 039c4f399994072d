import { Type, type Static } from 'typebox';
import { GATEWAYS } from './gateways/gateway.js';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, Nullable, PageQuery, SlugParams, StringEnum, Timestamp } from '../../http/schemas.js';

const tags = ['Wallet'];


export const Wallet = Type.Object(
  {
    balance: Type.Integer({ description: 'Minor units (cents), rounded down: what the ledger sums to.' }),
    currency: Type.String(),
    alert_threshold: Type.Integer({ description: 'The owners are notified when the balance falls below it (minor units).' }),
    unbilled: Type.Number({ description: 'Usage metered in the current hour and not yet in the ledger, minor units (exact).' }),
    available: Type.Integer({ description: 'balance − unbilled, rounded down: paid work needs it above 0.' }),
    state: StringEnum(['active', 'grace', 'suspended'] as const, { description: 'grace: empty, work runs until suspends_at; suspended: work stopped until a top-up.' }),
    suspends_at: Nullable(Timestamp),
  },
  { additionalProperties: false },
);
export type Wallet = Static<typeof Wallet>;

export const getWallet = {
  operationId: 'getWallet',
  tags,
  summary: "The workspace wallet: balance (minor units), currency, alert threshold, what is metered and not yet billed",
  params: SlugParams,
  response: { 200: Envelope(Wallet), ...authErrors },
};

export const setAlertThreshold = {
  operationId: 'setWalletAlertThreshold',
  tags,
  summary: 'Set the low-balance alert threshold, in minor units (owner/admin)',
  params: SlugParams,
  body: Type.Object({ threshold: Type.Integer({ minimum: 0, maximum: 1_000_000_000_000 }) }, { additionalProperties: false }),
  response: { 200: Envelope(Type.Object({ threshold: Type.Integer() }, { additionalProperties: false })), ...authErrors, ...bodyErrors },
};

export const Transaction = Type.Object(
  {
    id: Type.String(),
    type: StringEnum(['topup', 'usage', 'refund', 'adjustment', 'grant'] as const, {
      description: 'topup: a payment through a gateway (or the sandbox); usage: an hour of metered usage; refund; adjustment: the starting credit; grant: credit the operator granted (`slipway admin grant-credit`).',
    }),
    amount: Type.Number({ description: 'Minor units, signed; usage carries up to four decimals (micro-units of the currency).' }),
    balance_after: Type.Number({ description: 'Minor units, exact.' }),
    description: Type.String(),
    created_at: Timestamp,
  },
  { additionalProperties: false },
);
export type Transaction = Static<typeof Transaction>;

export const TransactionPage = Type.Object({ transactions: Type.Array(Transaction), total: Type.Integer(), page: Type.Integer(), limit: Type.Integer() }, { additionalProperties: false });
export type TransactionPage = Static<typeof TransactionPage>;

export const listTransactions = {
  operationId: 'listWalletTransactions',
  tags,
  summary: 'The ledger, newest first: every balance change is one row; usage is one row per hour (owner/admin)',
  params: SlugParams,
  querystring: PageQuery,
  response: {
    200: Envelope(TransactionPage),
    ...authErrors,
  },
};

export const Payment = Type.Object(
  {
    id: Type.String(),
    gateway: Type.String({ description: 'gatewaya or gatewayb' }),
    provider: Type.String({ description: 'stripe, paystack or sandbox' }),
    status: StringEnum(['pending', 'succeeded', 'failed'] as const),
    amount: Type.Integer({ description: 'Minor units.' }),
    currency: Type.String(),
    checkout_url: Nullable(Type.String()),
    failure_reason: Nullable(Type.String()),
    created_at: Timestamp,
    completed_at: Nullable(Timestamp),
  },
  { additionalProperties: false },
);
export type Payment = Static<typeof Payment>;

export const PaymentPage = Type.Object({ payments: Type.Array(Payment), total: Type.Integer(), page: Type.Integer(), limit: Type.Integer() }, { additionalProperties: false });
export type PaymentPage = Static<typeof PaymentPage>;

export const listPayments = {
  operationId: 'listWalletPayments',
  tags,
  summary: 'Top-ups, newest first (owner/admin)',
  params: SlugParams,
  querystring: PageQuery,
  response: {
    200: Envelope(PaymentPage),
    ...authErrors,
  },
};

export const UsageLine = Type.Object(
  {
    resource_id: Type.String(),
    resource_kind: Type.String({ description: 'project, template, database, or backups (the stored backups of a database, resource_id `backups:<database id>`)' }),
    name: Type.String(),
    minutes: Type.Integer(),
    quantities: Type.Object({ vcpu_minutes: Type.Number(), gib_minutes: Type.Number(), database_gib_minutes: Type.Number() }, { additionalProperties: false }),
    cost: Type.Number({ description: 'Minor units, exact.' }),
  },
  { additionalProperties: false },
);
export type UsageLine = Static<typeof UsageLine>;

export const WalletUsage = Type.Object(
  {
    period: Type.String({ description: 'YYYY-MM' }),
    period_start: Timestamp,
    period_end: Timestamp,
    currency: Type.String(),
    unit_prices: Type.Object({ vcpu_minute: Type.Number(), gib_minute: Type.Number(), database_gib_minute: Type.Number() }, { additionalProperties: false, description: 'Minor units per minute.' }),
    resources: Type.Array(UsageLine),
    total: Type.Number({ description: 'Minor units.' }),
    projected_total: Type.Number({ description: 'total plus what runs now, at its current rate, until period_end.' }),
  },
  { additionalProperties: false },
);
export type WalletUsage = Static<typeof WalletUsage>;

export const getUsage = {
  operationId: 'getWalletUsage',
  tags,
  summary: 'Usage of the current calendar month (UTC) by resource, unit prices, total and the projection to the end of the month',
  params: SlugParams,
  response: {
    200: Envelope(WalletUsage),
    ...authErrors,
  },
};

export const Topup = Type.Object(
  {
    payment_id: Type.String(),
    status: StringEnum(['pending', 'succeeded', 'failed'] as const),
    checkout_url: Nullable(Type.String({ description: 'Where the payer completes the payment; null for the sandbox, which confirms at once.' })),
    amount: Type.Number({ description: 'As given.' }),
    currency: Type.String(),
    gateway: StringEnum(GATEWAYS),
    provider: Type.String(),
  },
  { additionalProperties: false },
);
export type Topup = Static<typeof Topup>;

const currency = Type.Optional(Type.String({ minLength: 1, maxLength: 8, description: 'ISO 4217; must be the wallet\'s currency (the default).' }));

export const topupA = {
  operationId: 'topUpWalletGatewayA',
  tags,
  summary: 'Top up through gatewaya (Stripe Checkout): amount in MAJOR units, 10 = 10.00 USD (owner/admin)',
  description:
    'At most the currency\'s minor-unit decimals (2 for USD), checked exactly: 10.005 or 0.999999999 answers 400. ' +
    'Without Stripe keys the path is off (503 naming the settings), unless the operator turned on the sandbox (`--payments sandbox`), which credits at once without payment.',
  params: SlugParams,
  body: Type.Object({ amount: Type.Number({ exclusiveMinimum: 0, 'x-error': 'must be a positive number of major units, like 10 (= 10.00)' }), currency }, { additionalProperties: false }),
  response: { 200: Envelope(Topup), 502: ErrorEnvelope, 503: ErrorEnvelope, ...authErrors, ...bodyErrors },
};

export const topupB = {
  operationId: 'topUpWalletGatewayB',
  tags,
  summary: 'Top up through gatewayb (Paystack): amount in MINOR units, 1000 = 10.00 USD (owner/admin)',
  description:
    'A whole number of minor units: 1000.5 answers 400. ' +
    'Without a Paystack key the path is off (503 naming the setting), unless the operator turned on the sandbox (`--payments sandbox`), which credits at once without payment.',
  params: SlugParams,
  body: Type.Object({ amount: Type.Number({ exclusiveMinimum: 0, 'x-error': 'must be a positive whole number of minor units, like 1000 (= 10.00)' }), currency }, { additionalProperties: false }),
  response: { 200: Envelope(Topup), 502: ErrorEnvelope, 503: ErrorEnvelope, ...authErrors, ...bodyErrors },
};

export const paymentWebhook = {
  operationId: 'receivePaymentWebhook',
  tags: ['Webhooks'],
  summary: 'A payment gateway\'s signed webhook: confirms a top-up (no API key)',
  description:
    'gatewaya: Stripe events signed with `Stripe-Signature` (the endpoint secret, `--stripe-webhook-secret`, 300 s tolerance); ' +
    'gatewayb: Paystack events signed with `x-paystack-signature` (HMAC-SHA512 of the raw body under `--paystack-secret-key`). ' +
    'A bad signature answers 401 and changes nothing. Every verified event answers 200 with what it did: a replay or an event for a payment already settled changes nothing.',
  security: [],
  params: Type.Object({ gateway: StringEnum(GATEWAYS) }),
  response: {
    200: Envelope(Type.Object({ outcome: StringEnum(['credited', 'failed', 'ignored', 'duplicate', 'mismatch', 'unknown', 'settled'] as const) }, { additionalProperties: false })),
    400: ErrorEnvelope,
    401: ErrorEnvelope,
    404: ErrorEnvelope,
    413: ErrorEnvelope,
    415: ErrorEnvelope,
    429: ErrorEnvelope,
    503: ErrorEnvelope,
  },
};
