import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openWallet } from './billing/wallet.service.js';
import { iso } from './domain/clock.js';
import { isUniqueViolation } from './store/dialects.js';
import { MAX_KEY_DAYS, type ApiKeyService } from './tenancy/api-keys.service.js';
import type { Deps } from './deps.js';
import { createNewUser } from './tenancy/users.js';
import { DEFAULT_SETTINGS } from './tenancy/views.js';

export const BOOTSTRAP_WORKSPACE = 'default';

export interface Bootstrapped {
  email: string;
  workspace: string;
  key: string;
  keyFile: string;
}

/**
 * On a store without users: an owner, the workspace `default` and one API key, which is
 * returned to be printed once and written to `<data-dir>/bootstrap-key` (mode 0600). Returns
 * null when the store already has users (or another replica bootstrapped it first).
 */
export async function bootstrap(
  deps: Deps,
  keys: ApiKeyService,
  opts: { adminEmail: string; dataDir: string },
): Promise<Bootstrapped | null> {
  const any = await deps.store.db.selectFrom('users').select('id').limit(1).executeTakeFirst();
  if (any !== undefined) return null;
  const keyFile = join(opts.dataDir, 'bootstrap-key');
  let key: string;
  try {
    key = await deps.store.db.transaction().execute(async (trx) => {
      // Strictly new: a user that appeared meanwhile (another replica) is never handed this key.
      const user = await createNewUser(deps, trx, opts.adminEmail, 'Admin');
      const now = iso(deps.clock.now());
      const workspaceId = deps.ids.id();
      await trx
        .insertInto('workspaces')
        .values({ id: workspaceId, name: 'Default', slug: BOOTSTRAP_WORKSPACE, settings: JSON.stringify(DEFAULT_SETTINGS), created_at: now, updated_at: now })
        .execute();
      await trx.insertInto('members').values({ workspace_id: workspaceId, user_id: user.id, role: 'owner', joined_at: now }).execute();
      await openWallet(deps, trx, workspaceId);
      const created = await keys.issue(trx, { userId: user.id, workspaceId, name: 'bootstrap', expiresInDays: MAX_KEY_DAYS });
      // Written before the commit: a crash in between leaves a stale file that the next first
      // start overwrites, never a committed owner whose key exists nowhere.
      mkdirSync(opts.dataDir, { recursive: true });
      writeFileSync(keyFile, `${created.key}\n`, { mode: 0o600 });
      chmodSync(keyFile, 0o600);
      return created.key;
    });
  } catch (err) {
    if (isUniqueViolation(err)) return null;
    throw err;
  }
  return { email: opts.adminEmail, workspace: BOOTSTRAP_WORKSPACE, key, keyFile };
}
