import { describe, expect, it } from 'vitest';
import { idSource, systemRandom, uuidv4, uuidv7 } from './clock.js';
import { isEmailAddress } from './email.js';
import { API_KEY_PATTERN, digestsEqual, displayPrefix, newApiKey, sha256Hex } from './keys.js';
import { allows, atLeast } from './roles.js';
import { isSlug, slugify } from './slug.js';

const fixed = (ms: number) => ({ now: () => new Date(ms) });
const counting = () => {
  let i = 0;
  return { bytes: (n: number) => Buffer.alloc(n, i++) };
};

describe('ids and keys', () => {
  it('makes version-4 UUIDs from the injected randomness alone', () => {
    const u = uuidv4({ bytes: (n) => Buffer.alloc(n, 0xff) });
    expect(u).toBe('ffffffff-ffff-4fff-bfff-ffffffffffff');
    expect(uuidv4(systemRandom)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('makes UUIDv7 ids that carry their time and sort by it', () => {
    const random = counting();
    const a = uuidv7(fixed(1_700_000_000_000), random);
    const b = uuidv7(fixed(1_700_000_000_001), random);
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(a.replace(/-/g, '').slice(0, 12), 16)).toBe(1_700_000_000_000);
    expect(a < b).toBe(true);
  });

  it('makes ids in creation order within one millisecond, and when the clock steps back', () => {
    let ms = 1_700_000_000_000;
    const ids = idSource({ now: () => new Date(ms) }, systemRandom);
    const made: string[] = [];
    for (let i = 0; i < 1000; i++) made.push(ids.id());
    ms -= 5;
    made.push(ids.id());
    ms += 10;
    made.push(ids.id());
    expect([...made].sort()).toEqual(made);
    expect(new Set(made).size).toBe(made.length);
    for (const id of made) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(made[0]?.replace(/-/g, '').slice(0, 12) ?? '', 16)).toBe(1_700_000_000_000);
    expect(parseInt(made.at(-1)?.replace(/-/g, '').slice(0, 12) ?? '', 16)).toBe(1_700_000_000_005);
  });

  it('makes keys in the spec format with a display prefix', () => {
    const key = newApiKey({ bytes: (n) => Buffer.alloc(n, 0xab) });
    expect(key).toBe(`svc_sk_${'ab'.repeat(20)}`);
    expect(API_KEY_PATTERN.test(key)).toBe(true);
    expect(displayPrefix(key)).toBe('svc_sk_ababab...');
  });

  it('compares digests in constant time and only when lengths match', () => {
    const d = sha256Hex('x');
    expect(digestsEqual(d, sha256Hex('x'))).toBe(true);
    expect(digestsEqual(d, sha256Hex('y'))).toBe(false);
    expect(digestsEqual(d, 'ab')).toBe(false);
  });
});

describe('roles', () => {
  it('orders owner > admin > member', () => {
    expect(atLeast('owner', 'admin')).toBe(true);
    expect(atLeast('admin', 'owner')).toBe(false);
    expect(allows('member', 'workspace.operate')).toBe(true);
    expect(allows('member', 'members.manage')).toBe(false);
    expect(allows('admin', 'billing.manage')).toBe(true);
    expect(allows('admin', 'workspace.own')).toBe(false);
  });
});

describe('slugs', () => {
  it.each([
    ['My App', 'my-app'],
    ['  Hello__World!! ', 'hello-world'],
    ['Ünïcode', 'n-code'],
    ['a'.repeat(80), 'a'.repeat(63)],
  ])('slugify(%j) = %j', (name, slug) => {
    expect(slugify(name)).toBe(slug);
    expect(isSlug(slug)).toBe(true);
  });

  it('rejects what is not a DNS label', () => {
    for (const bad of ['', '-a', 'a-', 'A', 'a_b', 'a'.repeat(64)]) expect(isSlug(bad)).toBe(false);
  });
});

describe('isEmailAddress', () => {
  it('takes a dot-atom local part at a host name of one or more labels, and nothing else', () => {
    for (const ok of ['admin@localhost', 'a.b+c@example.com', 'ops@build-01', "o'neil@x.example"]) expect(isEmailAddress(ok), ok).toBe(true);
    for (const bad of ['nobody', 'a@b@c', '@x', 'a@', 'a b@c', 'a@-x', 'a@x-', 'a..b@c', 'a@x..y', `a@${'x'.repeat(64)}`, `${'a'.repeat(250)}@x.io`]) {
      expect(isEmailAddress(bad), bad).toBe(false);
    }
  });
});
