// The template catalog's schema and checks, and the shipped catalog entry by entry.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Catalog, catalogProblems, imageTag, readCatalogFile, SHIPPED_CATALOG, type CatalogEntry } from './catalog.js';

const good: CatalogEntry = {
  key: 'demo',
  name: 'Demo',
  description: 'A demo app.',
  category: 'test',
  website: 'https://example.com',
  source: 'https://github.com/acme/demo',
  image: 'acme/demo:1.2.3',
  version: '1.2.3',
  default_port: '8080',
  default_cpu: '0.5',
  default_ram: '0.5',
  required_envs: [{ key: 'ADMIN_EMAIL', placeholder: 'you@example.com' }],
  optional_envs: [],
  databases: ['postgresql'],
  env: { SECRET: '${hex:64}', DATABASE_URL: '${{databases.postgresql.connection_string}}', BASE: '${url}' },
  volumes: ['/data'],
  command: ['serve', '--port', '8080'],
};

describe('template catalog checks', () => {
  it('accepts a good entry', () => {
    expect(catalogProblems([good])).toEqual([]);
  });

  it('names the entry and the field of every problem', () => {
    const bad = [
      { ...good, key: 'a', image: 'acme/demo', default_port: '70000' },
      { ...good, key: 'b', image: 'acme/demo:latest', env: { X: '${password:4}', Y: '${{databases.redis.url}}', Z: '${nonsense}' } },
      { ...good, key: 'c', required_envs: [{ key: 'SECRET', placeholder: 'x' }], default_ram: '64' },
      { ...good, key: 'd', databases: ['postgresql', 'redis'] },
      { ...good, key: 'e', extra: 1 },
      { ...good, key: 'f', command: 'serve --port 8080' },
      { ...good, key: 'a' },
    ];
    expect(catalogProblems(bad)).toEqual([
      'entry "a" field image: "acme/demo" must be pinned to a version (repository:tag or @sha256:…).',
      'entry "a" field default_port: 70000 is not a port.',
      'entry "b" field image: "acme/demo:latest" must be pinned to a version, not "latest".',
      'entry "b" field env.X: ${password:4}: a generated value is 8 to 256 long.',
      'entry "b" field env.Y: ${{databases.redis.url}}: the template does not declare a redis database.',
      'entry "b" field env.Z: ${nonsense} is not a generator (${password:N}, ${hex:N}, ${base64:N}, ${uuid}), ${url}, ${domain} or ${{databases.<type>.<field>}}.',
      'entry "c" field default_ram: 64 must be from 0.125 to 32 GiB.',
      'entry "c" field required_envs.0: SECRET is also preset in env.',
      expect.stringMatching(/^entry "d" field databases: .+\.$/),
      'entry "e" field extra: is not a field of a catalog entry.',
      expect.stringMatching(/^entry "f" field command: .+\.$/),
      'entry "a": the key is used by an earlier entry.',
    ]);
    expect(catalogProblems({})).toEqual(['the file must hold a JSON array of entries.']);
  });

  it('reads image tags, with registries that have ports', () => {
    expect(imageTag('ghcr.io/acme/app:2.1')).toBe('2.1');
    expect(imageTag('localhost:5000/app')).toBeNull();
    expect(imageTag('localhost:5000/app:3')).toBe('3');
    expect(imageTag('app@sha256:abc')).toBe('digest');
  });

  it('suggests near keys', () => {
    const c = new Catalog([good, { ...good, key: 'wordpress' }, { ...good, key: 'ghost' }]);
    expect(c.near('wordpres')).toEqual(['wordpress']);
    expect(c.near('ghosts')).toEqual(['ghost']);
    expect(c.near('zzzzzzzzzz')).toEqual([]);
  });
});

describe('the shipped catalog', () => {
  const entries = readCatalogFile(SHIPPED_CATALOG);

  it('passes every check', () => {
    expect(catalogProblems(JSON.parse(readFileSync(SHIPPED_CATALOG, 'utf8')))).toEqual([]);
  });

  it('holds at least 40 apps, each with a pinned image, a port, sizes and its wiring', () => {
    expect(entries.length).toBeGreaterThanOrEqual(40);
    for (const e of entries) {
      expect(imageTag(e.image), e.key).not.toBeNull();
      expect(e.image, e.key).not.toMatch(/:latest$/);
      // every database it declares is wired into some variable
      for (const db of e.databases) expect(Object.values(e.env).join('\n'), `${e.key} wires its ${db}`).toContain(`databases.${db}.`);
    }
  });
});
