import balenaDockerignore, { type Ignore } from '@balena/dockerignore';
import { readdir, readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { createGzip } from 'node:zlib';
import { pack } from 'tar-fs';

// the parser dockerode used (Docker's rules); a CommonJS module whose export is the factory itself
const dockerignore = balenaDockerignore as unknown as (options?: { ignorecase?: boolean }) => Ignore;

/**
 * A build context as the engine's build endpoint takes it: the directory as a tar, without what
 * its `.dockerignore` leaves out. Patterns match paths relative to the context (`sub/secret.txt`,
 * `**\/*.md`, `!keep.md`), at every depth, as `docker build` applies them. `compress`: gzipped,
 * for an engine across a network; to a local socket, compressing only costs time on both sides
 * (`docker build` sends it uncompressed too unless told `--compress`).
 */
export async function packBuildContext(dir: string, opts: { compress: boolean }): Promise<Readable> {
  const ignored = await ignoreRules(dir);
  const entries = await readdir(dir);
  const tar = pack(dir, {
    entries: ignored === undefined ? entries : entries.filter((name) => !ignored(name)),
    // tar-fs names the files below the entries by their full path
    ...(ignored === undefined ? {} : { ignore: (name: string) => ignored(relative(dir, name).split(sep).join('/')) }),
  });
  // a Node stream either way (tar-fs makes a streamx one)
  const out = opts.compress ? createGzip() : new PassThrough();
  // an unreadable file fails the request body instead of leaving the engine waiting for its end
  tar.on('error', (err: Error) => out.destroy(err));
  return tar.pipe(out);
}

/** Whether a path (relative, `/`-separated) is left out; undefined without a .dockerignore. */
async function ignoreRules(dir: string): Promise<((path: string) => boolean) | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, '.dockerignore'), 'utf8');
  } catch {
    return undefined;
  }
  const keep = dockerignore({ ignorecase: false }).add(text).createFilter();
  return (path) => !keep(path);
}
