import { Type, type Static } from 'typebox';
import { authErrors, bodyErrors, Email, Envelope, ErrorEnvelope, Name, RoleSchema, SlugParams, StringEnum, Timestamp } from '../../http/schemas.js';
import { Workspace } from './workspaces.schema.js';

const invitationFields = {
  id: Type.String(),
  email: Type.String(),
  role: RoleSchema,
  status: StringEnum(['pending', 'accepted', 'expired'] as const),
  expires_at: Timestamp,
  created_at: Timestamp,
};

export const Invitation = Type.Object(invitationFields, { additionalProperties: false });
export type Invitation = Static<typeof Invitation>;
export const CreatedInvitation = Type.Object(
  {
    ...invitationFields,
    token: Type.Optional(
      Type.String({
        description:
          'Single-use. Present only when the installation has no SMTP server and --invitation-token-in-response is yes; with SMTP the token is e-mailed to the invited address and never returned.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreatedInvitation = Static<typeof CreatedInvitation>;

/** The key fields only for a user created by this acceptance (docs/decisions.md#invitations). */
export const AcceptedInvitation = Type.Object(
  {
    user_id: Type.String(),
    workspace: Workspace,
    role: RoleSchema,
    key: Type.Optional(Type.String({ description: 'Only for a user created by this acceptance: the first API key, shown once.' })),
    key_prefix: Type.Optional(Type.String()),
    expires_at: Type.Optional(Timestamp),
  },
  { additionalProperties: false },
);
export type AcceptedInvitation = Static<typeof AcceptedInvitation>;

const tags = ['Invitations'];

export const createInvitation = {
  operationId: 'createInvitation',
  tags,
  summary: 'Invite someone by e-mail (owner/admin); the token is e-mailed (SMTP) or, without SMTP, returned only here',
  params: SlugParams,
  body: Type.Object({ email: Email, role: RoleSchema }, { additionalProperties: false }),
  response: { 201: Envelope(CreatedInvitation), ...authErrors, ...bodyErrors, 409: ErrorEnvelope, 502: ErrorEnvelope },
};

export const listInvitations = {
  operationId: 'listInvitations',
  tags,
  summary: 'List the invitations of a workspace (owner/admin)',
  params: SlugParams,
  response: { 200: Envelope(Type.Array(Invitation)), ...authErrors },
};

export const deleteInvitation = {
  operationId: 'deleteInvitation',
  tags,
  summary: 'Revoke an invitation (owner/admin)',
  params: Type.Object({ slug: Type.String(), id: Type.String() }),
  response: { 200: Envelope(Invitation), ...authErrors },
};

export const acceptInvitation = {
  operationId: 'acceptInvitation',
  tags,
  summary:
    'Redeem an invitation token: a new user needs no API key and gets a first one; an existing user sends their own key in X-API-Key and gets none',
  security: [{}, { apiKey: [] }],
  body: Type.Object(
    { token: Type.String({ minLength: 1, maxLength: 128 }), name: Type.Optional(Name) },
    { additionalProperties: false },
  ),
  response: {
    201: Envelope(AcceptedInvitation),
    400: ErrorEnvelope,
    401: ErrorEnvelope,
    404: ErrorEnvelope,
    409: ErrorEnvelope,
    429: ErrorEnvelope,
    ...bodyErrors,
  },
};
