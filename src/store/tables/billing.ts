export interface WalletsTable {
  workspace_id: string;
  /** micro-units of the currency (1 USD = 1,000,000); bigint (string from pg) */
  balance_micros: string | number;
  currency: string;
  /** minor units */
  alert_threshold: string | number;
  /** when the available balance reached 0; null while it is above */
  empty_since: string | null;
  /** comma-separated notices already sent for the current crossing: below, empty, suspended */
  alerts_sent: string;
  created_at: string;
  updated_at: string;
}

/** grant: credit the operator granted (`slipway admin grant-credit`), apart from payments */
export type TransactionType = 'topup' | 'usage' | 'refund' | 'adjustment' | 'grant';

export interface WalletTransactionsTable {
  id: string;
  workspace_id: string;
  type: TransactionType;
  /** micro-units, signed */
  amount_micros: string | number;
  balance_after_micros: string | number;
  description: string;
  /** what caused it, unique per workspace: `payment:<id>`, `usage:<hour>`; null: nothing to dedupe */
  reference: string | null;
  created_at: string;
}

/** A running resource's meter: minutes before `next_minute` (epoch minutes) are metered. */
export interface BillingMetersTable {
  resource_id: string;
  workspace_id: string;
  next_minute: string | number;
  /** what is below one micro-unit, in 1/1,024,000,000 of a micro-unit, carried to the next minutes */
  carry: string | number;
  /** 1: it ran when last metered (the minutes since are charged); 0: it did not (only the current minute is, once it runs again) */
  running: number;
}

/** Metered usage of one resource: per open hour (accruals) or per posted month (usage). */
export interface UsageColumns {
  workspace_id: string;
  resource_id: string;
  /** project | template | database */
  resource_kind: string;
  resource_name: string;
  minutes: string | number;
  /** replicas × millicores × minutes */
  vcpu_milli_minutes: string | number;
  /** replicas × milli-GiB × minutes */
  ram_milli_minutes: string | number;
  /** a database's memory, MiB × minutes */
  db_mib_minutes: string | number;
  amount_micros: string | number;
}

export interface BillingAccrualsTable extends UsageColumns {
  /** RFC 3339 start of the hour */
  hour: string;
}

export interface BillingUsageTable extends UsageColumns {
  /** YYYY-MM (UTC) */
  period: string;
}

export type PaymentStatus = 'pending' | 'succeeded' | 'failed';

export interface PaymentsTable {
  id: string;
  workspace_id: string;
  /** gatewaya | gatewayb */
  gateway: string;
  /** stripe | paystack | sandbox */
  provider: string;
  /** the gateway's id of the payment; null until the gateway answered */
  reference: string | null;
  /** minor units */
  amount: string | number;
  currency: string;
  status: PaymentStatus;
  checkout_url: string | null;
  failure_reason: string | null;
  created_by: string | null;
  created_at: string;
  updated_at: string;
  completed_at: string | null;
}

/** A gateway event acted on; a replay of the same id is not. */
export interface PaymentEventsTable {
  gateway: string;
  event_id: string;
  payment_id: string | null;
  /** credited | failed | ignored | duplicate | mismatch | unknown */
  outcome: string;
  received_at: string;
}

/** A user whose first workspace got the starting credit. */
export interface StartingCreditsTable {
  user_id: string;
  workspace_id: string | null;
  granted_at: string;
}

export interface BillingTables {
  wallets: WalletsTable;
  wallet_transactions: WalletTransactionsTable;
  billing_meters: BillingMetersTable;
  billing_accruals: BillingAccrualsTable;
  billing_usage: BillingUsageTable;
  payments: PaymentsTable;
  payment_events: PaymentEventsTable;
  starting_credits: StartingCreditsTable;
}
