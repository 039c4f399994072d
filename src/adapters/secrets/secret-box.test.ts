import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { systemRandom } from '../../domain/clock.js';
import { SecretBox } from './secret-box.js';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32), systemRandom);

  it('round-trips and never shows the plaintext', () => {
    const sealed = box.seal('hunter2-postgres://u:p@db/x', 'env:p1:DATABASE_URL');
    expect(sealed).toMatch(/^v1:[^:]+:[^:]+:[^:]+$/);
    expect(sealed).not.toContain('hunter2');
    expect(box.open(sealed, 'env:p1:DATABASE_URL')).toBe('hunter2-postgres://u:p@db/x');
  });

  it('uses a fresh IV: the same value seals differently each time', () => {
    expect(box.seal('same', 'c')).not.toBe(box.seal('same', 'c'));
  });

  it('refuses another context, another key and altered ciphertext', () => {
    const sealed = box.seal('value', 'env:p1:A');
    expect(() => box.open(sealed, 'env:p2:A')).toThrow();
    expect(() => new SecretBox(randomBytes(32), systemRandom).open(sealed, 'env:p1:A')).toThrow();
    const parts = sealed.split(':');
    const body = Buffer.from(parts[3] ?? '', 'base64');
    body[0] = (body[0] ?? 0) ^ 1;
    expect(() => box.open([parts[0], parts[1], parts[2], body.toString('base64')].join(':'), 'env:p1:A')).toThrow();
    expect(() => box.open('plaintext', 'env:p1:A')).toThrow('not a sealed value');
  });

  it('seals the empty string and multi-byte text', () => {
    expect(box.open(box.seal('', 'c'), 'c')).toBe('');
    expect(box.open(box.seal('ключ 🔑', 'c'), 'c')).toBe('ключ 🔑');
  });
});
