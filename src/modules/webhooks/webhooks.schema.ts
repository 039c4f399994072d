import { Type } from 'typebox';
import { Envelope, ErrorEnvelope } from '../../http/schemas.js';

export const Ping = Type.Object({ event: Type.Literal('ping') }, { additionalProperties: false });

export const Duplicate = Type.Object(
  {
    event: Type.Literal('push'),
    duplicate: Type.Literal(true),
    reason: Type.String({ description: 'One sentence: this delivery repeats one already done; nothing was deployed.' }),
  },
  { additionalProperties: false },
);

const ProjectOutcome = Type.Object(
  {
    project_id: Type.String(),
    outcome: Type.Union([Type.Literal('queued'), Type.Literal('payment_required'), Type.Literal('memory_bound'), Type.Literal('duplicate_commit'), Type.Literal('installation_not_linked')], {
      description:
        '`queued`: deployed. `payment_required`: not deployed, the workspace wallet has no credit (recorded on the project as a failed deployment saying so). ' +
        '`memory_bound`: not deployed, its containers would take the memory all tenants reserve past --max-reserved-memory (recorded the same way). ' +
        '`duplicate_commit`: not deployed again, a Git deployment of this commit is already queued, under way or running. ' +
        '`installation_not_linked` (App route): not deployed, the project\'s workspace has not linked the delivering installation (any more).',
    }),
    deployment_id: Type.Union([Type.String(), Type.Null()], {
      description: 'The deployment queued; the one of this commit already live; the failed one that records the refusal; null for installation_not_linked.',
    }),
    reason: Type.String({ description: 'One sentence: what was done, or why not.' }),
  },
  { additionalProperties: false },
);

export const Queued = (description: string) =>
  Type.Object(
    {
      event: Type.Literal('push'),
      repo_full_name: Type.String(),
      branch: Type.String(),
      commit_sha: Type.String(),
      deployments: Type.Array(Type.String(), { description }),
      outcome: Type.Union([Type.Literal('deployed'), Type.Literal('partly_deployed'), Type.Literal('not_deployed'), Type.Literal('no_project')], {
        description:
          '`deployed`: every project the push is for was deployed. `partly_deployed` / `not_deployed`: some / none was (projects[] says why). ' +
          '`no_project`: no project is connected to this repository and branch with auto_deploy on.',
      }),
      done: Type.Boolean({
        description:
          'Whether the delivery is recorded as processed. false when something was not deployed for a cause that can be fixed: GitHub\'s Redeliver then acts on it again.',
      }),
      reason: Type.String({ description: 'One sentence: what this delivery did, and why not where it did not.' }),
      projects: Type.Array(ProjectOutcome, { description: 'One entry per project the push is for.' }),
    },
    { additionalProperties: false },
  );

export const Ignored = Type.Object(
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
  '`ping` answers 200; a push to a branch answers 202 saying, per project, what was deployed and why not (`projects[]`), and whether the delivery is `done`; ' +
  'a delivery that is not done (an empty wallet, the commit already under way, an installation not linked) is acted on again when GitHub redelivers it. ' +
  'A repeat of a delivery that is done (same id or body) answers 200 with `duplicate: true`; other events, tag pushes and branch deletions answer 202 ' +
  'with `ignored: true`. A queued deployment builds the pushed commit only if it is still the head of the branch when the build fetches it; ' +
  'otherwise it fails and nothing is built. Rate limits: a correctly signed delivery counts against its receiver (`--webhook-rate-limit`), ' +
  'a wrongly signed one (or an unknown webhook URL) against the client address.';

export const githubAppWebhook = {
  operationId: 'receiveGitHubAppWebhook',
  tags: ['Webhooks'],
  summary: 'GitHub App webhook: a signed push deploys the projects connected through that installation (no API key)',
  description:
    'For the deliveries of the GitHub App only. Authenticated by `X-Hub-Signature-256` (HMAC-SHA256 of the raw body under `--github-webhook-secret`), ' +
    'not by an API key. A push deploys the projects whose Git connection names the delivering installation ' +
    '(`installation.id`), that installation being linked to the project\'s workspace, with that repository and branch and `auto_deploy` on. ' +
    'A push without `installation` is ignored: repository webhooks deliver to their Git connection\'s own `webhook_url`. ' +
    BODY,
  security: [],
  headers,
  response: {
    200: Envelope(Type.Union([Ping, Duplicate])),
    202: Envelope(
      Type.Union([
        Queued('Ids of the deployments queued: one per project connected through this installation (linked to its workspace) to this repository and branch with auto_deploy on, that was deployed.'),
        Ignored,
      ]),
    ),
    ...errors,
    503: ErrorEnvelope,
  },
};

export const connectionWebhook = {
  operationId: 'receiveGitWebhook',
  tags: ['Webhooks'],
  summary: 'Repository webhook of one Git connection: a signed push deploys that connection\'s project (no API key)',
  description:
    'The `webhook_url` of a Git connection. Authenticated by `X-Hub-Signature-256` (HMAC-SHA256 of the raw body under that connection\'s own ' +
    '`webhook_secret`, shown when the connection is made or the secret rotated), not by an API key. ' +
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
        Queued('The id of the deployment queued; empty when it was not deployed (projects[] says why).'),
        Ignored,
      ]),
    ),
    ...errors,
    404: ErrorEnvelope,
  },
};
