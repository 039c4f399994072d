import { Type } from 'typebox';
import { Envelope, ErrorEnvelope } from '../../schemas.js';

const Ping = Type.Object({ event: Type.Literal('ping') }, { additionalProperties: false });

const Duplicate = Type.Object(
  {
    event: Type.Literal('push'),
    duplicate: Type.Literal(true),
    reason: Type.String({ description: 'One sentence: this delivery repeats one already processed; nothing was deployed.' }),
  },
  { additionalProperties: false },
);

const Queued = (description: string) =>
  Type.Object(
    {
      event: Type.Literal('push'),
      repo_full_name: Type.String(),
      branch: Type.String(),
      deployments: Type.Array(Type.String(), { description }),
    },
    { additionalProperties: false },
  );

const Ignored = Type.Object(
  {
    event: Type.String(),
    ignored: Type.Literal(true),
    reason: Type.String({ description: 'One sentence: why nothing was done.' }),
  },
  { additionalProperties: false },
);

const headers = Type.Object({
  'x-github-event': Type.Optional(Type.String({ description: '`push`, `ping`, …' })),
  'x-hub-signature-256': Type.Optional(Type.String({ description: '`sha256=` and 64 hex digits.' })),
  'x-github-delivery': Type.Optional(
    Type.String({ description: 'Delivery id, required on a push: a push whose id (or body) was already processed answers 200 `duplicate` and deploys nothing.' }),
  ),
});

const errors = {
  400: ErrorEnvelope,
  401: ErrorEnvelope,
  413: ErrorEnvelope,
  415: ErrorEnvelope,
  429: ErrorEnvelope,
};

const BODY =
  'The body is the event payload, as `application/json` or as the `payload` field of `application/x-www-form-urlencoded`, at most 1 MiB. ' +
  '`ping` answers 200; a push to a branch answers 202 with the queued deployments, or 200 with `duplicate: true` when the same delivery (id or body) ' +
  'was already processed; other events, tag pushes and branch deletions answer 202 with `ignored: true`. A queued deployment builds the pushed ' +
  'commit only if it is still the head of the branch when the build fetches it; otherwise it fails and nothing is built.';

export const githubAppWebhook = {
  tags: ['Webhooks'],
  summary: 'GitHub App webhook: a signed push deploys the projects connected through that installation (no API key)',
  description:
    'For the deliveries of the GitHub App only. Authenticated by `X-Hub-Signature-256` (HMAC-SHA256 of the raw body under `--github-webhook-secret`), ' +
    'not by an API key; rate-limited per client address. A push deploys the projects whose Git connection names the delivering installation ' +
    '(`installation.id`), that installation being linked to the project\'s workspace, with that repository and branch and `auto_deploy` on. ' +
    'A push without `installation` is ignored: repository webhooks deliver to their Git connection\'s own `webhook_url`. ' +
    BODY,
  security: [],
  headers,
  response: {
    200: Envelope(Type.Union([Ping, Duplicate])),
    202: Envelope(
      Type.Union([
        Queued('Ids of the deployments queued: one per project connected through this installation to this repository and branch with auto_deploy on, whose workspace has credit. Empty when none is.'),
        Ignored,
      ]),
    ),
    ...errors,
    503: ErrorEnvelope,
  },
};

export const connectionWebhook = {
  tags: ['Webhooks'],
  summary: 'Repository webhook of one Git connection: a signed push deploys that connection\'s project (no API key)',
  description:
    'The `webhook_url` of a Git connection. Authenticated by `X-Hub-Signature-256` (HMAC-SHA256 of the raw body under that connection\'s own ' +
    '`webhook_secret`, shown when the connection is made or the secret rotated), not by an API key; rate-limited per client address. ' +
    'A push deploys that connection\'s project only, and only when the payload\'s repository and branch are the connection\'s and `auto_deploy` is on ' +
    '(otherwise 202 `ignored`). An unknown webhook id answers 404. ' +
    BODY,
  security: [],
  params: Type.Object({ webhook_id: Type.String({ maxLength: 128, description: 'The random id of the Git connection\'s webhook URL.' }) }),
  headers,
  response: {
    200: Envelope(Type.Union([Ping, Duplicate])),
    202: Envelope(
      Type.Union([
        Queued('The id of the deployment queued; empty when the workspace has no credit.'),
        Ignored,
      ]),
    ),
    ...errors,
    404: ErrorEnvelope,
  },
};
