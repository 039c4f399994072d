import { iso, systemSources } from '../../domain/clock.js';
import { isRole, type Role } from '../../domain/roles.js';
import { isEmailAddress } from '../../domain/email.js';
import type { Config } from '../config.js';
import { createStore } from '../../store/db.js';
import { ApiKeyService, DEFAULT_KEY_DAYS } from '../../modules/tenancy/api-keys.service.js';
import { createNewUser, normalizeEmail } from '../../modules/tenancy/users.js';
import { Duplicate } from '../../domain/errors.js';
import { formatMinor, grantCredit as grant, GrantError } from '../../modules/billing/grants.js';

import { CliError } from '../errors.js';

/**
 * `slipway admin create-user`: works on the store directly (the server may be running: SQLite
 * waits for its write lock), creates the user, adds them to a workspace and prints a key.
 */
export async function createUser(config: Config, input: { email: string; workspace: string; role: string; name?: string | undefined }): Promise<{ userId: string; key: string; expiresAt: string }> {
  if (!isEmailAddress(input.email)) throw new CliError(`--email must be an e-mail address (got "${input.email}").`);
  if (!isRole(input.role)) throw new CliError(`--role must be one of owner, admin, member (got "${input.role}").`);
  const role: Role = input.role;
  // Only the store: no read connection, no log store, no secret key (nothing is sealed here).
  const store = await createStore(config.databaseUrl, { readConnection: false });
  try {
    const deps = systemSources();
    const keys = new ApiKeyService(store.repos, deps.clock, deps.random, deps.ids);
    const email = normalizeEmail(input.email);
    const taken = () => new CliError(`A user with e-mail ${email} already exists.`);
    return await store.transaction(async (tx) => {
      const ws = await tx.workspaces.bySlug(input.workspace);
      if (ws === undefined) throw new CliError(`There is no workspace "${input.workspace}".`);
      if ((await tx.users.byEmail(email)) !== undefined) throw taken();
      // Strictly new: a user created meanwhile by another process is never handed this key.
      // The operator vouches for the address: verified.
      const user = await createNewUser(deps, tx, { email, name: input.name, verified: true });
      await tx.members.add({ workspace_id: ws.id, user_id: user.id, role, status: 'active', joined_at: iso(deps.clock.now()) });
      const key = await keys.issue(tx, { userId: user.id, workspaceId: ws.id, name: 'admin-cli', expiresInDays: DEFAULT_KEY_DAYS });
      return { userId: user.id, key: key.key, expiresAt: key.expires_at };
    }).catch((err: unknown) => {
      throw err instanceof Duplicate ? taken() : err;
    });
  } finally {
    await store.close();
  }
}

/**
 * `slipway admin verify-user`: the operator vouches for a user's address, as an e-mailed
 * invitation would prove it: the user may create workspaces, and their first gets the starting
 * credit (docs/security.md, "Made-up users"). Verifying a verified user changes nothing.
 */
export async function verifyUser(config: Config, input: { email: string }): Promise<{ userId: string; email: string; verifiedAt: string; already: boolean }> {
  if (!isEmailAddress(input.email)) throw new CliError(`--email must be an e-mail address (got "${input.email}").`);
  const store = await createStore(config.databaseUrl, { readConnection: false });
  try {
    const { clock } = systemSources();
    const email = normalizeEmail(input.email);
    return await store.transaction(async (tx) => {
      const user = await tx.users.byEmail(email);
      if (user === undefined) throw new CliError(`There is no user with e-mail ${email}.`);
      if (user.verified_at !== null) return { userId: user.id, email, verifiedAt: user.verified_at, already: true };
      const at = iso(clock.now());
      await tx.users.verify(user.id, at);
      return { userId: user.id, email, verifiedAt: at, already: false };
    });
  } finally {
    await store.close();
  }
}

/**
 * `slipway admin grant-credit`: the operator credits a workspace's wallet without a payment, on
 * the store directly (the server may be running; its billing worker sees the new balance at its
 * next pass). One ledger row of type `grant`, written with the balance change; returns the line
 * that says what was done.
 */
export async function grantCredit(config: Config, input: { workspace: string; amount: string; reason?: string | undefined }): Promise<string> {
  const store = await createStore(config.databaseUrl, { readConnection: false });
  try {
    const g = await grant(store, systemSources(), input).catch((err: unknown) => {
      throw err instanceof GrantError ? new CliError(err.message) : err;
    });
    return `Granted ${formatMinor(g.amount, g.currency)} ${g.currency} to workspace ${g.workspace}: its balance is now ${formatMinor(g.balance, g.currency)} ${g.currency} (ledger row ${g.transactionId}, type grant, ${g.at}).`;
  } finally {
    await store.close();
  }
}
