import { addDays, iso, type Clock, type IdSource, type Random } from '../../domain/clock.js';
import { forbidden, notFound, unauthorized } from '../../domain/errors.js';
import { API_KEY_PATTERN, digestsEqual, displayPrefix, newApiKey, sha256Hex } from '../../domain/keys.js';
import { atLeast } from '../../domain/roles.js';
import type { Repositories } from '../../store/repositories/index.js';
import type { Access, Caller } from '../../domain/access.js';
import type { ApiKey, CreatedApiKey } from './api-keys.schema.js';
import { apiKeyView } from './views.js';

export const DEFAULT_KEY_DAYS = 90;
export const MAX_KEY_DAYS = 3650;
/** last_used_at is written at most this often per key, not on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;
const MAX_TOUCHED = 10_000;

export class ApiKeyService {
  /** when this process last wrote each key's `last_used_at`, by key id */
  private readonly touched = new Map<string, number>();

  constructor(
    private readonly repos: Pick<Repositories, 'apiKeys'>,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly ids: IdSource,
  ) {}

  /** Mint a key for a user, listed under a workspace (in `tx`'s transaction, if any). Only the digest is stored. */
  async issue(
    tx: Pick<Repositories, 'apiKeys'>,
    input: { userId: string; workspaceId: string; name: string; expiresInDays: number },
  ): Promise<CreatedApiKey> {
    const now = this.clock.now();
    const key = newApiKey(this.random);
    const row = {
      id: this.ids.id(),
      user_id: input.userId,
      workspace_id: input.workspaceId,
      name: input.name,
      key_hash: sha256Hex(key),
      key_prefix: displayPrefix(key),
      expires_at: iso(addDays(now, input.expiresInDays)),
      created_at: iso(now),
      last_used_at: null,
      revoked_at: null,
    };
    await tx.apiKeys.insert(row);
    return { ...apiKeyView(row), key };
  }

  create(access: Access, input: { name: string; expires_in_days?: number | undefined }): Promise<CreatedApiKey> {
    return this.issue(this.repos, {
      userId: access.caller.user.id,
      workspaceId: access.workspace.id,
      name: input.name,
      expiresInDays: input.expires_in_days ?? DEFAULT_KEY_DAYS,
    });
  }

  /** Admins and owners see every live key of the workspace; members see their own. */
  async list(access: Access): Promise<ApiKey[]> {
    const own = atLeast(access.role, 'admin') ? undefined : access.caller.user.id;
    return (await this.repos.apiKeys.listLive(access.workspace.id, own)).map(apiKeyView);
  }

  async revoke(access: Access, keyId: string): Promise<ApiKey> {
    const { apiKeys } = this.repos;
    const row = await apiKeys.findLive(access.workspace.id, keyId);
    if (row === undefined) throw notFound('API key');
    if (row.user_id !== access.caller.user.id && !atLeast(access.role, 'admin')) {
      throw forbidden('Only an owner or admin can revoke the API key of another member.');
    }
    await apiKeys.revoke(row.id, iso(this.clock.now()));
    return apiKeyView(row);
  }

  /** The caller behind an `X-API-Key`, or 401 with the reason. */
  async authenticate(key: string | undefined): Promise<Caller> {
    if (key === undefined || key === '') throw unauthorized('An API key is required in the X-API-Key header.');
    if (!API_KEY_PATTERN.test(key)) throw unauthorized('The API key is not valid.');
    const digest = sha256Hex(key);
    const { apiKeys } = this.repos;
    const found = await apiKeys.findByDigest(digest);
    if (found === undefined || !digestsEqual(found.key.key_hash, digest)) throw unauthorized('The API key is not valid.');
    const { key: row, user } = found;
    if (row.revoked_at !== null) throw unauthorized('The API key has been revoked.');
    const now = this.clock.now();
    const at = now.getTime();
    if (Date.parse(row.expires_at) <= at) throw unauthorized('The API key has expired.');
    // The key row may come from the access cache, which does not show this process's own
    // writes: `touched` does, so that a busy key is still written at most once a minute.
    const touchedAt = this.touched.get(row.id);
    if (touchedAt !== undefined && at - touchedAt < LAST_USED_RESOLUTION_MS) return { keyId: row.id, user };
    const last = Math.max(row.last_used_at === null ? Number.NEGATIVE_INFINITY : Date.parse(row.last_used_at), touchedAt ?? Number.NEGATIVE_INFINITY);
    if (at - last >= LAST_USED_RESOLUTION_MS) {
      this.touched.delete(row.id);
      this.touched.set(row.id, now.getTime());
      if (this.touched.size > MAX_TOUCHED) this.touched.delete(this.touched.keys().next().value ?? '');
      await apiKeys.touch(row.id, iso(now));
    }
    return { keyId: row.id, user };
  }
}
