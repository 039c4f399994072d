import { hash } from 'node:crypto';
import type { Random } from './clock.js';

export const API_KEY_PREFIX = 'svc_sk_';
export const API_KEY_PATTERN = /^svc_sk_[0-9a-f]{40}$/;
export const INVITATION_TOKEN_PREFIX = 'svc_inv_';
export const INVITATION_TOKEN_PATTERN = /^svc_inv_[0-9a-f]{40}$/;

/** `svc_sk_` + 40 lowercase hex: 160 random bits. */
export const newApiKey = (random: Random): string => API_KEY_PREFIX + random.bytes(20).toString('hex');

export const newInvitationToken = (random: Random): string =>
  INVITATION_TOKEN_PREFIX + random.bytes(20).toString('hex');

/** Only this digest is stored; the key itself is shown once. */
export const sha256Hex = (value: string): string => hash('sha256', value, 'hex');

/** What listings show instead of the key: `svc_sk_` + the first 6 hex + an ellipsis. */
export const displayPrefix = (key: string): string => `${key.slice(0, API_KEY_PREFIX.length + 6)}...`;

/**
 * Comparison of two digests that takes the same time wherever they differ: every character is
 * looked at (timingSafeEqual needed two buffers decoded per request on the API's hot path).
 */
export function digestsEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let differ = 0;
  for (let i = 0; i < a.length; i++) differ |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return differ === 0;
}
