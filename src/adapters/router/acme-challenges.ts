/**
 * ACME HTTP-01 answers (RFC 8555 §8.3): the certificate manager puts a token's key
 * authorization here while the CA validates it, and the router answers
 * `GET /.well-known/acme-challenge/<token>` from it on its plain HTTP listener, for every host.
 * Key authorizations are public by design (the CA fetches them over plain HTTP); no secret here.
 */
export const ACME_CHALLENGE_PATH = '/.well-known/acme-challenge/';

/** base64url, as RFC 8555 §8.3 requires of tokens */
const TOKEN = /^[A-Za-z0-9_-]{1,256}$/;

export class AcmeChallenges {
  private readonly answers = new Map<string, string>();

  set(token: string, keyAuthorization: string): void {
    if (!TOKEN.test(token)) throw new Error(`The ACME challenge token "${token}" is not base64url.`);
    this.answers.set(token, keyAuthorization);
  }

  delete(token: string): void {
    this.answers.delete(token);
  }

  /** The key authorization for a request path, or undefined (unknown token, other path). */
  answer(path: string | undefined): string | undefined {
    const token = challengeToken(path);
    return token === undefined ? undefined : this.answers.get(token);
  }
}

/** The token of a `/.well-known/acme-challenge/<token>` path (query ignored); undefined otherwise. */
export function challengeToken(path: string | undefined): string | undefined {
  if (path?.startsWith(ACME_CHALLENGE_PATH) !== true) return undefined;
  const token = path.slice(ACME_CHALLENGE_PATH.length).split('?')[0] ?? '';
  return TOKEN.test(token) ? token : undefined;
}

/** Whether a request path is for the challenge responder (answered even when the token is unknown). */
export const isChallengePath = (path: string | undefined): boolean => path?.startsWith(ACME_CHALLENGE_PATH) === true;
