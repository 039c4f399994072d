import { Type, type Static } from 'typebox';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, ProjectParams } from '../../http/schemas.js';
import { GitConnection } from './projects.schema.js';

/** Shown once, when the connection is made or the secret rotated. */
const WebhookSecret = Type.String({
  description: 'The secret of this connection\'s repository webhook (64 hex digits): give it to the GitHub webhook at `webhook_url`. Shown only in this response.',
});

/** The connection with its secret: one closed object (an allOf of two closed ones would admit no instance). */
export const NewGitConnection = Type.Object({ ...GitConnection.properties, webhook_secret: WebhookSecret }, { additionalProperties: false });
export type NewGitConnection = Static<typeof NewGitConnection>;

/** What `POST …/git/webhook-secret` answers: the new secret, shown this once. */
export const RotatedWebhookSecret = Type.Object({ webhook_url: Type.String(), webhook_secret: WebhookSecret }, { additionalProperties: false });
export type RotatedWebhookSecret = Static<typeof RotatedWebhookSecret>;

/** `owner/repository` as GitHub spells them; `.` and `..` are not names. */
const RepoFullName = Type.String({
  pattern: '^(?!\\.{1,2}/)[A-Za-z0-9_.-]{1,100}/(?!\\.{1,2}$)[A-Za-z0-9_.-]{1,100}$',
  'x-error': 'must be "owner/repository"',
  examples: ['acme/web'],
});

/** A branch name git accepts (git check-ref-format, the common subset). */
const Branch = Type.String({
  pattern: '^(?![/.-])(?!.*\\.\\.)(?!.*//)(?!.*@\\{)(?!.*\\.lock$)(?!.*[/.]$)[A-Za-z0-9._/+-]{1,255}$',
  'x-error': 'must be a valid Git branch name',
});

/** A path inside the repository: relative, no `..` segment. */
const RepoPath = (allowEmpty: boolean) =>
  Type.String({
    pattern: `^(?!/)(?!(.*/)?\\.\\.(/|$))[A-Za-z0-9._/-]${allowEmpty ? '*' : '+'}$`,
    maxLength: 255,
    'x-error': 'must be a relative path inside the repository, without ".."',
  });

const fields = {
  branch: Branch,
  installation_id: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'GitHub App installation id (0: none).' }),
  auto_deploy: Type.Boolean({ description: 'Deploy on every push to the branch (default true).' }),
  dockerfile_path: RepoPath(false),
  root_dir: RepoPath(true),
};

const ConnectBody = Type.Object(
  {
    repo_full_name: RepoFullName,
    branch: Type.Optional(fields.branch),
    installation_id: Type.Optional(fields.installation_id),
    auto_deploy: Type.Optional(fields.auto_deploy),
    dockerfile_path: Type.Optional(fields.dockerfile_path),
    root_dir: Type.Optional(fields.root_dir),
  },
  { additionalProperties: false },
);

const tags = ['Git'];

export const connectGit = {
  operationId: 'connectGitRepository',
  tags,
  summary: 'Connect a Git repository to the project',
  params: ProjectParams,
  body: ConnectBody,
  response: { 201: Envelope(NewGitConnection), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const updateGit = {
  operationId: 'updateGitConnection',
  tags,
  summary: 'Change the Git connection',
  params: ProjectParams,
  body: Type.Partial(ConnectBody, { additionalProperties: false, minProperties: 1 }),
  response: { 200: Envelope(GitConnection), ...authErrors, ...bodyErrors },
};

export const deleteGit = {
  operationId: 'deleteGitConnection',
  tags,
  summary: 'Remove the Git connection',
  params: ProjectParams,
  response: { 200: Envelope(GitConnection), ...authErrors },
};

export const rotateWebhookSecret = {
  operationId: 'rotateGitWebhookSecret',
  tags,
  summary: 'Make a new webhook secret for the Git connection (the old one stops verifying at once)',
  description: 'Answers the new secret once, with the webhook URL. Also makes the first secret of a connection created before per-connection secrets.',
  params: ProjectParams,
  response: {
    200: Envelope(RotatedWebhookSecret),
    ...authErrors,
  },
};
