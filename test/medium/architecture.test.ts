// The shape of src/ (docs/decisions.md): the domain owns the vocabulary and the ports and depends
// on nothing else of Slipway's; the store only on the domain; projects/ and deploy/ do not depend
// on each other both ways.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

/** Every .ts file under `dir`, tests included. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

/** The relative modules a file imports or re-exports (static, type-only and dynamic), as .ts paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/\bfrom\s+['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s+['"]([^'"]+)['"]/gm)].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
  return specs.filter((s) => s.startsWith('.')).map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

const rel = (file: string) => relative(SRC, file);
const area = (file: string) => rel(file).split('/')[0];

/** The import graph of src/ (non-test files), file to files. */
function graph(): Map<string, string[]> {
  return new Map(sources(SRC).filter((f) => !f.endsWith('.test.ts')).map((f) => [f, importsOf(f)]));
}

/** The files `from` reaches through imports, each with the path that reaches it. */
function reach(g: Map<string, string[]>, from: string): Map<string, string[]> {
  const paths = new Map<string, string[]>([[from, [from]]]);
  const todo = [from];
  for (let f = todo.pop(); f !== undefined; f = todo.pop()) {
    for (const to of g.get(f) ?? []) {
      if (paths.has(to)) continue;
      paths.set(to, [...(paths.get(f) ?? []), to]);
      todo.push(to);
    }
  }
  return paths;
}

/** Import paths that leave area `a`, enter area `b` and come back to `a`: a cycle between them. */
function cyclesBetween(g: Map<string, string[]>, a: string, b: string): string[] {
  const found: string[] = [];
  for (const start of [...g.keys()].filter((f) => area(f) === a)) {
    for (const [mid, toMid] of reach(g, start)) {
      if (area(mid) !== b) continue;
      const back = [...reach(g, mid)].find(([f]) => area(f) === a);
      if (back !== undefined) found.push([...toMid, ...back[1].slice(1)].map(rel).join(' -> '));
    }
  }
  return found;
}

describe('architecture of src/', () => {
  it('src/domain imports nothing else from src/', () => {
    const domain = join(SRC, 'domain');
    const outside = sources(domain).flatMap((f) => importsOf(f).filter((to) => !to.startsWith(`${domain}/`)).map((to) => `${rel(f)} -> ${rel(to)}`));
    expect(outside).toEqual([]);
  });

  it('src/store imports nothing of Slipway but src/domain: the repositories know no service', () => {
    const store = join(SRC, 'store');
    const domain = join(SRC, 'domain');
    const outside = sources(store).flatMap((f) =>
      importsOf(f)
        .filter((to) => !to.startsWith(`${store}/`) && !to.startsWith(`${domain}/`))
        .map((to) => `${rel(f)} -> ${rel(to)}`),
    );
    expect(outside).toEqual([]);
  });

  it('only the repositories query the store: no query is built outside src/store/', () => {
    // the log stores keep their own database (logs.db, or their tables on PostgreSQL)
    const ownStores = new Set(['logs/sqlite.log-store.ts', 'logs/postgres.log-store.ts']);
    const queries = sources(SRC)
      .filter((f) => !f.endsWith('.test.ts') && area(f) !== 'store' && !ownStores.has(rel(f)))
      .flatMap((f) =>
        readFileSync(f, 'utf8')
          .split('\n')
          .flatMap((line, i) => (/\.(selectFrom|insertInto|updateTable|deleteFrom|replaceInto|mergeInto)\(|\bsql`|from 'kysely'/.test(line) ? [`${rel(f)}:${String(i + 1)}`] : [])),
      );
    expect(queries).toEqual([]);
  });

  it('no import path leads from projects/ to deploy/ and back', () => {
    const g = graph();
    expect(cyclesBetween(g, 'projects', 'deploy')).toEqual([]);
    expect(cyclesBetween(g, 'deploy', 'projects')).toEqual([]);
  });

  it('slipway admin loads neither the server, the API nor the deploy engine', () => {
    const g = graph();
    const heavy = ['server.ts', 'api/app.ts', 'deploy/orchestrator.ts'].map((p) => join(SRC, p));
    const loaded = ['cli/admin.ts', 'cli/github.ts'].flatMap((cli) => {
      const paths = reach(g, join(SRC, cli));
      return heavy.flatMap((h) => (paths.has(h) ? [(paths.get(h) ?? []).map(rel).join(' -> ')] : []));
    });
    expect(loaded).toEqual([]);
  });

  it('the cycle check sees a cycle through a third area', () => {
    const f = (p: string) => join(SRC, p);
    const g = new Map([
      [f('projects/a.ts'), [f('deps.ts')]],
      [f('deps.ts'), [f('deploy/b.ts')]],
      [f('deploy/b.ts'), [f('projects/c.ts')]],
      [f('projects/c.ts'), []],
    ]);
    expect(cyclesBetween(g, 'projects', 'deploy')).toEqual(['projects/a.ts -> deps.ts -> deploy/b.ts -> projects/c.ts']);
  });
});
