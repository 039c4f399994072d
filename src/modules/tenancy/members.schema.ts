import { Type, type Static } from 'typebox';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, RoleSchema, SlugParams, StringEnum } from '../../http/schemas.js';

export const Member = Type.Object(
  {
    user_id: Type.String(),
    email: Type.String(),
    name: Type.String(),
    role: RoleSchema,
    status: StringEnum(['active', 'pending'] as const, {
      description:
        '`pending`: offered through POST …/members and not yet accepted by the user, with their own key; it grants nothing (the user gets 404 for the workspace, as a non-member does). `active`: a member with the role.',
    }),
    joined_at: Type.String({ format: 'date-time', description: 'When the user joined (accepted); for a pending membership, when it was offered. RFC 3339 UTC with milliseconds.' }),
  },
  { additionalProperties: false },
);
export type Member = Static<typeof Member>;

const MemberParams = Type.Object({ slug: Type.String(), user_id: Type.String() });
const tags = ['Members'];

export const listMembers = {
  operationId: 'listMembers',
  tags,
  summary: 'List the members of a workspace, active and pending',
  params: SlugParams,
  response: { 200: Envelope(Type.Array(Member)), ...authErrors },
};

export const addMember = {
  operationId: 'addMember',
  tags,
  summary: 'Offer an existing user a membership (owner/admin; only an owner offers owner); it stays pending until the user accepts it',
  description:
    'The membership is made with `status: pending` and grants nothing until the user accepts it with their own API key (POST …/members/:user_id/accept) or declines it. An unknown user is 404; a user who is already a member, or has a pending membership, 409.',
  params: SlugParams,
  body: Type.Object({ user_id: Type.String({ minLength: 1, maxLength: 64 }), role: RoleSchema }, { additionalProperties: false }),
  response: { 201: Envelope(Member), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const updateMember = {
  operationId: 'updateMember',
  tags,
  summary: "Change a member's role (owner/admin; only an owner grants or removes owner)",
  description: 'A pending membership cannot be changed (409): cancel it and offer the new role.',
  params: MemberParams,
  body: Type.Object({ role: RoleSchema }, { additionalProperties: false }),
  response: { 200: Envelope(Member), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const removeMember = {
  operationId: 'removeMember',
  tags,
  summary: 'Remove a member or cancel a pending membership (owner/admin), or leave the workspace (anyone)',
  params: MemberParams,
  response: { 200: Envelope(Member), ...authErrors, 409: ErrorEnvelope },
};

export const acceptMember = {
  operationId: 'acceptMembership',
  tags,
  summary: 'Accept a membership offered to you (only with your own API key)',
  description:
    'Makes your pending membership active, with the role it was offered with, and answers it. `:user_id` is your own user id. Another caller gets 404 (403 if they are a member of the workspace); an active member 409.',
  params: MemberParams,
  response: { 200: Envelope(Member), ...authErrors, 409: ErrorEnvelope },
};

export const declineMember = {
  operationId: 'declineMembership',
  tags,
  summary: 'Decline a membership offered to you (only with your own API key)',
  description: 'Removes your pending membership and answers it as it was. `:user_id` is your own user id. Another caller gets 404 (403 if they are a member of the workspace); an active member 409 (leave with DELETE instead).',
  params: MemberParams,
  response: { 200: Envelope(Member), ...authErrors, 409: ErrorEnvelope },
};
