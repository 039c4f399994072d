import { describe, expect, it } from 'vitest';
import { AcmeChallenges, challengeToken } from './acme-challenges.js';

describe('ACME HTTP-01 answers', () => {
  it('finds the token of a challenge path, ignoring a query', () => {
    expect(challengeToken('/.well-known/acme-challenge/abc_DEF-123')).toBe('abc_DEF-123');
    expect(challengeToken('/.well-known/acme-challenge/abc?x=1')).toBe('abc');
    expect(challengeToken('/.well-known/acme-challenge/')).toBeUndefined();
    expect(challengeToken('/.well-known/acme-challenge/../etc')).toBeUndefined();
    expect(challengeToken('/.well-known/security.txt')).toBeUndefined();
    expect(challengeToken(undefined)).toBeUndefined();
  });

  it('answers a token while it is set, and only that token', () => {
    const c = new AcmeChallenges();
    c.set('tok', 'tok.thumb');
    expect(c.answer('/.well-known/acme-challenge/tok')).toBe('tok.thumb');
    expect(c.answer('/.well-known/acme-challenge/other')).toBeUndefined();
    c.delete('tok');
    expect(c.answer('/.well-known/acme-challenge/tok')).toBeUndefined();
    expect(() => { c.set('not a token', 'x'); }).toThrow(/not base64url/);
  });
});
