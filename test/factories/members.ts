import type { Role } from '../../src/domain/roles.js';
import type { Reply, TestServer } from './harness.js';

export interface MemberReply {
  user_id: string;
  email: string;
  name: string;
  role: Role;
  status: 'active' | 'pending';
  joined_at: string;
}

/**
 * Makes `user` a member of workspace `slug` as the API does it, by consent: `byKey` (an owner
 * or admin) offers the membership (POST …/members, pending), and the user accepts it with their
 * own key (POST …/members/:user_id/accept). Answers both replies; a refused offer is not accepted.
 */
export async function addMember(
  s: TestServer,
  slug: string,
  byKey: string,
  user: { id: string; key: string },
  role: Role,
): Promise<{ added: Reply<MemberReply>; accepted: Reply<MemberReply> | null }> {
  const added = await s.request<MemberReply>('POST', `/api/workspaces/${slug}/members`, { key: byKey, body: { user_id: user.id, role } });
  if (added.status !== 201) return { added, accepted: null };
  const accepted = await s.request<MemberReply>('POST', `/api/workspaces/${slug}/members/${user.id}/accept`, { key: user.key });
  return { added, accepted };
}
