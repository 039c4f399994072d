import { Type } from 'typebox';
import { Envelope, ErrorEnvelope } from '../../schemas.js';

const Ping = Type.Object({ event: Type.Literal('ping') }, { additionalProperties: false });

const Queued = Type.Object(
  {
    event: Type.Literal('push'),
    repo_full_name: Type.String(),
    branch: Type.String(),
    deployments: Type.Array(Type.String(), {
      description: 'Ids of the deployments queued: one per project connected to this repository and branch with auto_deploy on, whose workspace has credit. Empty when none is.',
    }),
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

export const githubWebhook = {
  tags: ['Webhooks'],
  summary: 'GitHub webhook: a signed push deploys every connected project with auto_deploy on (no API key)',
  description:
    'Authenticated by `X-Hub-Signature-256` (HMAC-SHA256 of the raw body under `--github-webhook-secret`), not by an API key; ' +
    'rate-limited per client address. The body is the event payload, as `application/json` or as the `payload` field of ' +
    '`application/x-www-form-urlencoded`, at most 1 MiB. `ping` answers 200; `push` answers 202 with the queued deployments; ' +
    'other events, tag pushes and branch deletions answer 202 with `ignored: true`.',
  security: [],
  headers: Type.Object({
    'x-github-event': Type.Optional(Type.String({ description: '`push`, `ping`, …' })),
    'x-hub-signature-256': Type.Optional(Type.String({ description: '`sha256=` and 64 hex digits.' })),
    'x-github-delivery': Type.Optional(Type.String({ description: 'Delivery id; only logged. A redelivery deploys again.' })),
  }),
  response: {
    200: Envelope(Ping),
    202: Envelope(Type.Union([Queued, Ignored])),
    400: ErrorEnvelope,
    401: ErrorEnvelope,
    413: ErrorEnvelope,
    415: ErrorEnvelope,
    429: ErrorEnvelope,
    503: ErrorEnvelope,
  },
};
