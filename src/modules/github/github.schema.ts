import { Type, type Static } from 'typebox';
import { authErrors, Envelope, ErrorEnvelope, SlugParams, Timestamp } from '../../http/schemas.js';

const tags = ['GitHub'];

/** An installation id as GitHub writes it: a positive decimal integer below 2^53. */
const InstallationIdString = Type.String({
  pattern: '^[1-9][0-9]{0,15}$',
  'x-error': 'must be a GitHub App installation id: a positive whole number in decimal digits',
});

export const Installation = Type.Object(
  {
    installation_id: Type.Integer(),
    account_login: Type.String({ description: 'The GitHub account (user or organization) the app is installed on.' }),
    linked_at: Timestamp,
  },
  { additionalProperties: false },
);
export type Installation = Static<typeof Installation>;

/** Where the admin's browser goes: the app's installation page, carrying a fresh single-use state. */
export const LinkStart = Type.Object(
  {
    install_url: Type.String({ description: '`<app html_url>/installations/new?state=<state>`' }),
    state: Type.String(),
    expires_at: Timestamp,
  },
  { additionalProperties: false },
);
export type LinkStart = Static<typeof LinkStart>;

/** An installation just linked by the setup URL, with the workspace it was linked to. */
export const LinkedInstallation = Type.Object({ workspace: Type.String(), ...Installation.properties }, { additionalProperties: false });
export type LinkedInstallation = Static<typeof LinkedInstallation>;

export const startLink = {
  operationId: 'startGitHubLink',
  tags,
  summary: 'Start linking a GitHub App installation to the workspace (owner/admin)',
  description:
    'Answers a single-use `state`, good for one hour, and `install_url`, the GitHub App installation page carrying it. ' +
    "GitHub sends the admin's browser back to the app's setup URL, `GET /api/github/setup`, which links the installation " +
    'once GitHub confirms that the signed-in user can access it.',
  params: SlugParams,
  response: {
    201: Envelope(LinkStart),
    ...authErrors,
    503: ErrorEnvelope,
  },
};

export const setup = {
  operationId: 'completeGitHubSetup',
  tags,
  summary: "The GitHub App's setup URL: links the installation named by GitHub's redirect (no API key)",
  description:
    'GitHub redirects here after an installation, with `installation_id`, `setup_action`, the `state` of ' +
    '`POST …/github/installations/link` and, with "Request user authorization (OAuth) during installation" on, a `code`. ' +
    "The state must be Slipway's, unexpired and unused; the code is exchanged for the user's token, and the installation " +
    'is linked only if GitHub lists it among that user\'s installations (403 otherwise). Rate-limited per client address.',
  security: [],
  querystring: Type.Object({
    installation_id: Type.Optional(Type.String({ maxLength: 32 })),
    setup_action: Type.Optional(Type.String({ maxLength: 32 })),
    state: Type.Optional(Type.String({ maxLength: 2048 })),
    code: Type.Optional(Type.String({ maxLength: 512 })),
  }),
  response: {
    201: Envelope(LinkedInstallation),
    400: ErrorEnvelope,
    403: ErrorEnvelope,
    404: ErrorEnvelope,
    429: ErrorEnvelope,
    503: ErrorEnvelope,
  },
};

export const listInstallations = {
  operationId: 'listGitHubInstallations',
  tags,
  summary: 'List the GitHub App installations linked to the workspace',
  params: SlugParams,
  response: { 200: Envelope(Type.Array(Installation)), ...authErrors },
};

export const unlinkInstallation = {
  operationId: 'unlinkGitHubInstallation',
  tags,
  summary: 'Unlink a GitHub App installation (owner/admin): later builds that name it fail without cloning',
  params: Type.Object({ slug: Type.String(), installation_id: InstallationIdString }),
  response: { 200: Envelope(Installation), ...authErrors },
};
