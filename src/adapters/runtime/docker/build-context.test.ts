import { mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-fs';
import { afterEach, describe, expect, it } from 'vitest';
import { packBuildContext } from './build-context.js';

const cleanup: string[] = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function tempDir(files: Record<string, string> = {}): Promise<string> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), 'slipway-pack-')));
  cleanup.push(dir);
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  return dir;
}

/** What the engine would receive: the packed context unpacked, as sorted relative file paths. */
async function packed(dir: string, compress = false): Promise<{ files: string[]; out: string }> {
  const out = await tempDir();
  if (compress) await pipeline(await packBuildContext(dir, { compress }), createGunzip(), extract(out));
  else await pipeline(await packBuildContext(dir, { compress }), extract(out));
  const files = (await readdir(out, { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile())
    .map((e) => relative(out, join(e.parentPath, e.name)))
    .sort();
  return { files, out };
}

describe('packBuildContext', () => {
  it('packs every file of the context, nested ones included, with their content', async () => {
    const dir = await tempDir({ Dockerfile: 'FROM scratch\n', 'src/app.js': 'console.log(1)\n', 'src/lib/util.js': 'x' });
    const { files, out } = await packed(dir);
    expect(files).toEqual(['Dockerfile', 'src/app.js', 'src/lib/util.js']);
    expect(await readFile(join(out, 'src/app.js'), 'utf8')).toBe('console.log(1)\n');
  });

  it('gzips the tar for an engine across a network, and only then', async () => {
    const dir = await tempDir({ Dockerfile: 'FROM scratch\n', 'app.js': 'a' });
    expect((await packed(dir, true)).files).toEqual(['Dockerfile', 'app.js']);
    const first = async (compress: boolean) => {
      for await (const chunk of await packBuildContext(dir, { compress })) return (chunk as Buffer).subarray(0, 2).toString('hex');
      return '';
    };
    // the gzip magic number, or the tar's first header (a file name)
    expect(await first(true)).toBe('1f8b');
    expect(await first(false)).not.toBe('1f8b');
  });

  it('leaves out what .dockerignore names: top-level entries, directories, globs at any depth, with ! exceptions', async () => {
    const dir = await tempDir({
      Dockerfile: 'FROM scratch\n',
      '.dockerignore': 'node_modules\n*.md\n**/*.log\n!KEEP.md\nsub/secret.txt\n',
      'README.md': 'r',
      'KEEP.md': 'k',
      'node_modules/x/index.js': 'n',
      'app.js': 'a',
      'sub/keep.txt': 'k',
      'sub/secret.txt': 's',
      'sub/deep/trace.log': 'l',
    });
    const { files } = await packed(dir);
    expect(files).toEqual(['.dockerignore', 'Dockerfile', 'KEEP.md', 'app.js', 'sub/keep.txt']);
  });

  it('fails the stream when the directory cannot be packed', async () => {
    await expect(packBuildContext(join(tmpdir(), 'slipway-pack-missing-dir'), { compress: false })).rejects.toThrow();
  });

  it('docker.runtime.ts reaches into no private dockerode path', async () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const source = await readFile(join(here, 'docker.runtime.ts'), 'utf8');
    expect(source).not.toMatch(/dockerode\/lib\//);
  });
});
