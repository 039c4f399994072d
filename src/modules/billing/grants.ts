import { iso, type Sources } from '../../domain/clock.js';
import { floorMinor, microsPerMinor, minorDigits, scaledDecimal } from '../../domain/money.js';
import type { StoreOf } from '../../store/db.js';

/** Why a grant was refused: a sentence for the operator. */
export class GrantError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GrantError';
  }
}

export interface Grant {
  workspace: string;
  currency: string;
  /** minor units granted */
  amount: number;
  /** minor units, rounded down, after the grant */
  balance: number;
  /** the ledger row (type `grant`) */
  transactionId: string;
  at: string;
}

/** A longer reason would not be read; control characters would break the ledger's one-line rows. */
const REASON_MAX = 500;

/**
 * Credit the installation's operator grants a workspace (`slipway admin grant-credit`,
 * docs/billing.md#grants): no payment, so it is its own ledger type, `grant`, and its row says so
 * and why. The balance change and the row are written in one store transaction. `amount` is the
 * text the operator typed, in major units of the wallet's currency, with at most its minor-unit
 * decimals (checked exactly).
 */
export async function grantCredit(
  store: StoreOf<'workspaces' | 'wallets'>,
  sources: Pick<Sources, 'clock' | 'ids'>,
  input: { workspace: string; amount: string; reason?: string | undefined },
): Promise<Grant> {
  const reason = input.reason?.trim() ?? '';
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (reason.length > REASON_MAX || /[\u0000-\u001f\u007f]/.test(reason)) {
    throw new GrantError(`--reason must be one line of at most ${REASON_MAX.toString()} characters.`);
  }
  if (!/^\d{1,12}(\.\d{1,12})?$/.test(input.amount)) {
    throw new GrantError(`--amount must be a positive amount in major units of the wallet's currency, like 25 or 12.50 (got "${input.amount}").`);
  }
  return store.transaction(async (tx) => {
    const ws = await tx.workspaces.bySlug(input.workspace);
    if (ws === undefined) throw new GrantError(`There is no workspace "${input.workspace}".`);
    const wallet = await tx.wallets.get(ws.id);
    if (wallet === undefined) throw new Error(`workspace ${ws.id} has no wallet`);
    const digits = minorDigits(wallet.currency);
    const minor = scaledDecimal(input.amount, digits);
    if (minor === null || minor <= 0n) {
      throw new GrantError(`--amount must be a positive amount in major units of ${wallet.currency} with at most ${digits.toString()} decimals, like 25 or 12.50 (got "${input.amount}").`);
    }
    const micros = minor * BigInt(microsPerMinor(wallet.currency));
    // The store keeps balances as integers that must stay exact in a double.
    if (BigInt(wallet.balance_micros) + micros > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new GrantError(`--amount ${input.amount} would take the balance of workspace "${ws.slug}" past what Slipway keeps exactly; grant less.`);
    }
    const at = iso(sources.clock.now());
    const id = sources.ids.id();
    const row = await tx.wallets.post({
      id,
      workspaceId: ws.id,
      type: 'grant',
      amountMicros: Number(micros),
      description: reason === '' ? 'Credit granted by the operator' : `Credit granted by the operator: ${reason}`,
      reference: `grant:${id}`,
      at,
    });
    return { workspace: ws.slug, currency: wallet.currency, amount: Number(minor), balance: floorMinor(row.balance_after_micros, wallet.currency), transactionId: id, at };
  });
}

/** Minor units as the operator writes them: 2550 USD cents → "25.50". */
export function formatMinor(minor: number, currency: string): string {
  const digits = minorDigits(currency);
  const sign = minor < 0 ? '-' : '';
  const text = Math.abs(minor).toString().padStart(digits + 1, '0');
  return digits === 0 ? `${sign}${text}` : `${sign}${text.slice(0, -digits)}.${text.slice(-digits)}`;
}
