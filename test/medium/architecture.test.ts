// The shape of src/ (docs/architecture.md): dependencies point inward, app/ → modules/ → (http/,
// adapters/, store/) → domain/; no import cycle between folders, type-only imports included.
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

/**
 * The folder a file belongs to for the dependency rules: `modules/<m>` and `adapters/<a>` each
 * count as one; `domain`, `store`, `http` and `app` are one each; a file at the top (main.ts) is its own.
 */
function folderOf(path: string): string {
  const parts = path.split('/');
  const [top = '', second] = parts;
  if ((top === 'modules' || top === 'adapters') && parts.length > 2 && second !== undefined) return `${top}/${second}`;
  return top;
}

const kind = (folder: string) => folder.split('/')[0] ?? folder;

/** The import graph of src/ (non-test files), file to files. */
function graph(): Map<string, string[]> {
  return new Map(sources(SRC).filter((f) => !f.endsWith('.test.ts')).map((f) => [f, importsOf(f)]));
}

/** Folder to folders, each edge with the first file import that makes it. */
function folderGraph(g: Map<string, string[]>): Map<string, Map<string, string>> {
  const edges = new Map<string, Map<string, string>>();
  for (const [from, tos] of g) {
    const a = folderOf(rel(from));
    for (const to of tos) {
      const b = folderOf(rel(to));
      if (a === b) continue;
      const out = edges.get(a) ?? new Map<string, string>();
      if (!out.has(b)) out.set(b, `${rel(from)} -> ${rel(to)}`);
      edges.set(a, out);
    }
  }
  return edges;
}

/** Each cycle between folders, as the file imports that close it (one cycle per strongly connected group). */
function folderCycles(edges: Map<string, Map<string, string>>): string[][] {
  const nodes = new Set([...edges.keys(), ...[...edges.values()].flatMap((m) => [...m.keys()])]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = stack.pop()) {
      onStack.delete(w);
      group.push(w);
      if (w === v) break;
    }
    if (group.length > 1) groups.push(group);
  };
  for (const v of nodes) if (!index.has(v)) visit(v);
  // name the imports inside each group, so that the failure says which lines to change
  return groups.map((group) =>
    group.flatMap((a) => [...(edges.get(a) ?? new Map<string, string>())].filter(([b]) => group.includes(b)).map(([, why]) => why)).sort(),
  );
}

/** Imports from files of folder kind `from` into folders of a kind not in `allowed`. */
function outside(from: string, allowed: readonly string[]): string[] {
  const g = graph();
  return [...g].flatMap(([f, tos]) => {
    if (kind(folderOf(rel(f))) !== from) return [];
    return tos.filter((to) => !allowed.includes(kind(folderOf(rel(to))))).map((to) => `${rel(f)} -> ${rel(to)}`);
  });
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

describe('architecture of src/', () => {
  it('src/domain imports nothing else from src/', () => {
    expect(outside('domain', ['domain'])).toEqual([]);
  });

  it('src/store imports nothing of Slipway but src/domain: the repositories know no service', () => {
    expect(outside('store', ['store', 'domain'])).toEqual([]);
  });

  it('src/adapters import only src/domain (and each other)', () => {
    expect(outside('adapters', ['adapters', 'domain'])).toEqual([]);
  });

  it('src/http imports only src/domain: the auth plugin reaches keys and members through ports', () => {
    expect(outside('http', ['http', 'domain'])).toEqual([]);
  });

  it('src/modules import the domain, the store, http, the adapters and each other, never the composition root', () => {
    expect(outside('modules', ['modules', 'domain', 'store', 'http', 'adapters'])).toEqual([]);
  });

  it('only main.ts imports the composition root', () => {
    const g = graph();
    const into = [...g].flatMap(([f, tos]) => {
      const from = folderOf(rel(f));
      if (from === 'app' || rel(f) === 'main.ts') return [];
      return tos.filter((to) => folderOf(rel(to)) === 'app').map((to) => `${rel(f)} -> ${rel(to)}`);
    });
    expect(into).toEqual([]);
  });

  it('no import cycle between folders, type-only imports included', () => {
    expect(folderCycles(folderGraph(graph()))).toEqual([]);
  });

  it('only the repositories query the store: no query is built outside src/store/', () => {
    const queries = sources(SRC)
      .filter((f) => !f.endsWith('.test.ts') && folderOf(rel(f)) !== 'store')
      .flatMap((f) =>
        readFileSync(f, 'utf8')
          .split('\n')
          .flatMap((line, i) => (/\.(selectFrom|insertInto|updateTable|deleteFrom|replaceInto|mergeInto)\(|\bsql`|from 'kysely'/.test(line) ? [`${rel(f)}:${String(i + 1)}`] : [])),
      );
    expect(queries).toEqual([]);
  });

  it('every route plugin lives in its capability folder, beside its schema', () => {
    const misplaced = sources(SRC)
      .filter((f) => f.endsWith('.routes.ts'))
      .filter((f) => kind(folderOf(rel(f))) !== 'modules')
      .map(rel);
    expect(misplaced).toEqual([]);
  });

  it('slipway admin loads neither the HTTP API nor the deploy engine', () => {
    const g = graph();
    const heavy = ['app/server.ts', 'app/http.ts', 'modules/deployments/engine/orchestrator.ts'].map((p) => join(SRC, p));
    const admin = sources(join(SRC, 'app/admin')).filter((f) => !f.endsWith('.test.ts'));
    expect(admin.length).toBeGreaterThan(0);
    const loaded = admin.flatMap((cli) => {
      const paths = reach(g, cli);
      return heavy.flatMap((h) => (paths.has(h) ? [(paths.get(h) ?? []).map(rel).join(' -> ')] : []));
    });
    expect(loaded).toEqual([]);
  });

  it('the cycle check sees a cycle through a third folder, and the folder of a file is its capability', () => {
    expect(folderOf('modules/deployments/engine/orchestrator.ts')).toBe('modules/deployments');
    expect(folderOf('adapters/runtime/docker/engine.ts')).toBe('adapters/runtime');
    expect(folderOf('main.ts')).toBe('main.ts');
    const edges = new Map([
      ['modules/projects', new Map([['modules/deps', 'modules/projects/a.ts -> modules/deps/x.ts']])],
      ['modules/deps', new Map([['modules/deployments', 'modules/deps/x.ts -> modules/deployments/b.ts']])],
      ['modules/deployments', new Map([['modules/projects', 'modules/deployments/b.ts -> modules/projects/c.ts']])],
      ['store', new Map([['domain', 'store/db.ts -> domain/ids.ts']])],
    ]);
    expect(folderCycles(edges)).toEqual([
      ['modules/deployments/b.ts -> modules/projects/c.ts', 'modules/deps/x.ts -> modules/deployments/b.ts', 'modules/projects/a.ts -> modules/deps/x.ts'],
    ]);
  });
});
