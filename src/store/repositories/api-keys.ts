import type { Selectable } from 'kysely';
import type { ApiKeysTable } from '../tables/tenancy.js';
import { orDuplicate } from '../dialects.js';
import { Repository } from './repository.js';
import type { UserRow } from './users.js';

export type ApiKeyRow = Selectable<ApiKeysTable>;

/** A key found by its digest, with its user: what authentication decides on. */
export interface KeyWithUser {
  key: Pick<ApiKeyRow, 'id' | 'key_hash' | 'expires_at' | 'revoked_at' | 'last_used_at'>;
  user: UserRow;
}

export class ApiKeyRepository extends Repository {
  async insert(row: ApiKeyRow): Promise<void> {
    await orDuplicate(this.db.insertInto('api_keys').values(row).execute(), () => 'An API key with the same digest already exists.');
  }

  /** The key with this digest (live or not) and its user; the hot path: at most ACCESS_CACHE_MS old. */
  findByDigest(digest: string): Promise<KeyWithUser | undefined> {
    return this.cacheable ? this.cache.keys.get(digest, () => this.readByDigest(digest)) : this.readByDigest(digest);
  }

  private async readByDigest(digest: string): Promise<KeyWithUser | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .innerJoin('users', 'users.id', 'api_keys.user_id')
      .select([
        'api_keys.id as key_id',
        'api_keys.key_hash',
        'api_keys.expires_at',
        'api_keys.revoked_at',
        'api_keys.last_used_at',
        'users.id',
        'users.email',
        'users.name',
        'users.created_at',
        'users.verified_at',
      ])
      .where('api_keys.key_hash', '=', digest)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    return {
      key: { id: row.key_id, key_hash: row.key_hash, expires_at: row.expires_at, revoked_at: row.revoked_at, last_used_at: row.last_used_at },
      user: { id: row.id, email: row.email, name: row.name, created_at: row.created_at, verified_at: row.verified_at },
    };
  }

  /** Whether a key (still) exists, when it was revoked and when it expires. */
  validity(keyId: string): Promise<Pick<ApiKeyRow, 'revoked_at' | 'expires_at'> | undefined> {
    return this.db
      .selectFrom('api_keys')
      .innerJoin('users', 'users.id', 'api_keys.user_id')
      .select(['api_keys.revoked_at', 'api_keys.expires_at'])
      .where('api_keys.id', '=', keyId)
      .executeTakeFirst();
  }

  async touch(keyId: string, at: string): Promise<void> {
    await this.db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', keyId).execute();
  }

  /** The workspace's live keys, oldest first; only `userId`'s when given. */
  listLive(workspaceId: string, userId?: string): Promise<ApiKeyRow[]> {
    return this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('revoked_at', 'is', null)
      .$if(userId !== undefined, (q) => q.where('user_id', '=', userId ?? ''))
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  findLive(workspaceId: string, keyId: string): Promise<ApiKeyRow | undefined> {
    return this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', keyId)
      .where('workspace_id', '=', workspaceId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
  }

  async revoke(keyId: string, at: string): Promise<void> {
    await this.db.updateTable('api_keys').set({ revoked_at: at }).where('id', '=', keyId).execute();
    this.cache.invalidate();
  }

  /** Revokes the member's live keys listed under the workspace. */
  async revokeForMember(workspaceId: string, userId: string, at: string): Promise<void> {
    await this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('workspace_id', '=', workspaceId)
      .where('user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .execute();
    this.cache.invalidate();
  }
}
