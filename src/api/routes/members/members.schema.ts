import { Type } from 'typebox';
import { authErrors, Envelope, ErrorEnvelope, RoleSchema, SlugParams, Timestamp } from '../../schemas.js';

export const Member = Type.Object(
  { user_id: Type.String(), email: Type.String(), name: Type.String(), role: RoleSchema, joined_at: Timestamp },
  { additionalProperties: false },
);

const MemberParams = Type.Object({ slug: Type.String(), user_id: Type.String() });
const tags = ['Members'];

export const listMembers = {
  tags,
  summary: 'List the members of a workspace',
  params: SlugParams,
  response: { 200: Envelope(Type.Array(Member)), ...authErrors },
};

export const addMember = {
  tags,
  summary: 'Add an existing user to the workspace (owner/admin; only an owner grants owner)',
  params: SlugParams,
  body: Type.Object({ user_id: Type.String({ minLength: 1, maxLength: 64 }), role: RoleSchema }, { additionalProperties: false }),
  response: { 201: Envelope(Member), ...authErrors, 409: ErrorEnvelope },
};

export const updateMember = {
  tags,
  summary: "Change a member's role (owner/admin; only an owner grants or removes owner)",
  params: MemberParams,
  body: Type.Object({ role: RoleSchema }, { additionalProperties: false }),
  response: { 200: Envelope(Member), ...authErrors, 409: ErrorEnvelope },
};

export const removeMember = {
  tags,
  summary: 'Remove a member (owner/admin), or leave the workspace (anyone)',
  params: MemberParams,
  response: { 200: Envelope(Member), ...authErrors, 409: ErrorEnvelope },
};
