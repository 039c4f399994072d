// The repository stands on its own: code and docs cite the design decisions as sections of
// docs/decisions.md, never an outside document, and every section they cite exists.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url);
const TEXT = /\.(?:ts|mjs|js|md|sh)$/;

/** Every text file under src/, test/, scripts/, bench/ and docs/, plus the README, relative to the root. */
function sources(): string[] {
  const out = ['README.md'];
  for (const dir of ['src', 'test', 'scripts', 'bench', 'docs']) {
    for (const f of readdirSync(new URL(`${dir}/`, ROOT), { recursive: true, encoding: 'utf8' })) {
      if (TEXT.test(f)) out.push(`${dir}/${f}`);
    }
  }
  return out;
}

const read = (path: string): string => readFileSync(new URL(path, ROOT), 'utf8');

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens. */
const anchor = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

describe('design decisions', () => {
  const files = sources();
  const anchors = new Set(
    read('docs/decisions.md')
      .split('\n')
      .filter((l) => /^#{2,3} /.test(l))
      .map((l) => anchor(l.replace(/^#+ /, ''))),
  );

  it('no file cites the outside design document', () => {
    const outside = ['DESIGN', '§'].join(' ');
    expect(files.filter((f) => read(f).includes(outside))).toEqual([]);
  });

  it('every cited section of docs/decisions.md exists', () => {
    const cited = files.flatMap((f) => [...read(f).matchAll(/decisions\.md#([a-z0-9-]+)/g)].map((m) => `${f}: #${m[1] ?? ''}`));
    expect(cited.length).toBeGreaterThan(10);
    expect(cited.filter((c) => !anchors.has(c.slice(c.indexOf('#') + 1)))).toEqual([]);
  });
});
