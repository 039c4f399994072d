import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * GitHub webhook deliveries, without HTTP: the signature check over the raw body and the
 * reading of a push payload. Nothing here logs, and nothing keeps the body or the signature.
 * https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
 */

/** `sha256=` and the HMAC-SHA256 of the body under the secret, in lowercase hex: what GitHub sends. */
export function sign(secret: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export type SignatureCheck = { ok: true } | { ok: false; problem: 'missing' | 'malformed' | 'mismatch' };

const SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;

/**
 * Whether `header` (the X-Hub-Signature-256 value) signs `body` under `secret`. The digests are
 * compared in constant time; only the header's shape is checked before that, which says nothing
 * about the secret. An empty secret verifies nothing.
 */
export function verifySignature(secret: string, body: Buffer, header: string | string[] | undefined): SignatureCheck {
  if (header === undefined || header === '') return { ok: false, problem: 'missing' };
  const m = typeof header === 'string' ? SIGNATURE.exec(header.trim()) : null;
  const hex = m?.[1];
  if (hex === undefined) return { ok: false, problem: 'malformed' };
  if (secret === '') return { ok: false, problem: 'mismatch' };
  const expected = createHmac('sha256', secret).update(body).digest();
  const given = Buffer.from(hex, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected) ? { ok: true } : { ok: false, problem: 'mismatch' };
}

/** A signed delivery whose content cannot be used: the API answers 400 with the message. */
export class PayloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PayloadError';
  }
}

/**
 * The JSON document of a delivery. GitHub sends it as the body (content type `application/json`)
 * or, the default of a webhook made in GitHub's settings page, as the `payload` field of an
 * `application/x-www-form-urlencoded` body.
 */
export function decodePayload(body: Buffer, contentType: string | undefined): unknown {
  let text = body.toString('utf8');
  if (contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded') === true) {
    const payload = new URLSearchParams(text).get('payload');
    if (payload === null) throw new PayloadError('The form-encoded delivery has no "payload" field.');
    text = payload;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new PayloadError('The request body is not valid JSON.');
  }
}

/** SHA-256 of the raw body in hex: with the delivery id, what makes a delivery a repeat. */
export function payloadDigest(body: Buffer): string {
  return createHash('sha256').update(body).digest('hex');
}

/** The event names GitHub sends in X-GitHub-Event: `push`, `ping`, `pull_request`, … */
export const EVENT_NAME = /^[a-z][a-z0-9_]{0,63}$/;

/** A push to a branch: what auto-deploy needs. */
export interface BranchPush {
  kind: 'branch';
  repoFullName: string;
  branch: string;
  commitSha: string;
  commitMessage: string | undefined;
  /** `installation.id`: set on deliveries of a GitHub App, absent on a repository webhook's */
  installationId: number | undefined;
}

/** A push that deploys nothing whatever is connected (a tag, a deleted branch). */
export interface IgnoredPush {
  kind: 'ignored';
  repoFullName: string;
  reason: string;
}

const BRANCH_PREFIX = 'refs/heads/';
/** SHA-1 object names, and SHA-256 ones for repositories that use them. */
const COMMIT_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const ZERO_SHA = /^0+$/;
/** Generous, but bounded: the message is stored with the deployment. */
export const MAX_COMMIT_MESSAGE = 4096;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function text(value: unknown, name: string, max: number): string {
  if (typeof value !== 'string' || value === '') throw new PayloadError(`The push payload has no "${name}".`);
  if (value.length > max) throw new PayloadError(`The push payload's "${name}" is longer than ${max} characters.`);
  return value;
}

/**
 * Read a `push` event payload. Branch pushes give the repository, the branch, the new head
 * commit and its message; tag pushes and branch deletions are recognised and ignored. A payload
 * without the fields every push carries throws a PayloadError.
 */
export function parsePush(payload: unknown): BranchPush | IgnoredPush {
  if (!isObject(payload)) throw new PayloadError('The push payload must be a JSON object.');
  const repository = payload['repository'];
  const repoFullName = text(isObject(repository) ? repository['full_name'] : undefined, 'repository.full_name', 201);
  const ref = text(payload['ref'], 'ref', 1024);
  const after = payload['after'];

  if (!ref.startsWith(BRANCH_PREFIX) || ref.length === BRANCH_PREFIX.length) {
    return { kind: 'ignored', repoFullName, reason: `${ref} is not a branch; only pushes to branches deploy.` };
  }
  const branch = ref.slice(BRANCH_PREFIX.length);
  if (payload['deleted'] === true || (typeof after === 'string' && ZERO_SHA.test(after))) {
    return { kind: 'ignored', repoFullName, reason: `The branch ${branch} was deleted; there is nothing to deploy.` };
  }
  if (typeof after !== 'string' || !COMMIT_SHA.test(after)) {
    throw new PayloadError('The push payload\'s "after" must be a full commit id in lowercase hex.');
  }
  const head = payload['head_commit'];
  const message = isObject(head) && typeof head['message'] === 'string' ? head['message'] : undefined;
  const installation = payload['installation'];
  const installationId = isObject(installation) ? installation['id'] : undefined;
  return {
    kind: 'branch',
    repoFullName,
    branch,
    commitSha: after,
    commitMessage: message?.slice(0, MAX_COMMIT_MESSAGE),
    installationId: typeof installationId === 'number' && Number.isSafeInteger(installationId) && installationId > 0 ? installationId : undefined,
  };
}
