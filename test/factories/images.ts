// The local base image of the Docker tests. No registry is reachable, so nothing can be pulled:
// Debian's static busybox is copied into a root filesystem tar (with a symlink per applet, so
// `sh`, `httpd`, `sleep` … exist) and imported through the Engine API. `busybox httpd` serves
// the test apps.
//
// One image per test run, tagged and labelled with the run id. The vitest global setup (this
// module's setup/teardown) builds it once and removes everything labelled with the run at the
// end; a test file run without that setup gets a run of its own and cleans up with
// releaseTestRun().
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, open, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import tar from 'tar-fs';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    slipwayTestRun: string;
  }
}

/** Every container, image and network a Docker test creates carries this label (directly or through the base image). */
export const RUN_LABEL = 'slipway.test.run';
export const BASE_REPOSITORY = 'slipway-test/busybox';
const BUSYBOX = '/bin/busybox';

const ownRun = `r${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;

/** The run this process belongs to: the global setup's, or (run alone) one of its own. */
export function testRunId(): string {
  return sharedRunId() ?? ownRun;
}

function sharedRunId(): string | undefined {
  let provided: string | undefined;
  try {
    provided = inject('slipwayTestRun');
  } catch {
    // not inside a vitest worker (e.g. the global setup itself)
  }
  return provided ?? process.env['SLIPWAY_TEST_RUN'];
}

export const baseImageTag = (run = testRunId()): string => `${BASE_REPOSITORY}:${run}`;

const building = new Map<string, Promise<string>>();

/**
 * The base image's reference, imported on first use. Idempotent; concurrent callers in one
 * process share one import, and two processes that race both succeed (the tag ends on one of
 * the two images and the loser removes its own, so nothing unlabelled is left).
 */
export function ensureBaseImage(docker: Docker = new Docker(), run = testRunId()): Promise<string> {
  const tag = baseImageTag(run);
  let pending = building.get(tag);
  if (pending === undefined) {
    pending = importBaseImage(docker, run, tag);
    building.set(tag, pending);
    pending.catch(() => building.delete(tag));
  }
  return pending;
}

async function importBaseImage(docker: Docker, run: string, tag: string): Promise<string> {
  if (await exists(docker, tag)) return tag;
  await assertStaticBusybox();
  const root = await mkdtemp(join(tmpdir(), 'slipway-busybox-'));
  try {
    await mkdir(join(root, 'bin'));
    await copyFile(BUSYBOX, join(root, 'bin', 'busybox'));
    await chmod(join(root, 'bin', 'busybox'), 0o755);
    const { stdout } = await promisify(execFile)(BUSYBOX, ['--list']);
    for (const applet of stdout.split('\n').map((a) => a.trim())) {
      if (applet !== '' && applet !== 'busybox') await symlink('busybox', join(root, 'bin', applet));
    }
    await mkdir(join(root, 'tmp'));
    await chmod(join(root, 'tmp'), 0o1777);
    await mkdir(join(root, 'etc'));
    await mkdir(join(root, 'root'));
    await writeFile(join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n');
    await writeFile(join(root, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');

    const { repo, tagName } = { repo: BASE_REPOSITORY, tagName: run };
    // tar-fs packs with streamx streams: hand the engine a Node stream
    const archive = new PassThrough();
    tar.pack(root, { map: (header) => ({ ...header, uid: 0, gid: 0, uname: 'root', gname: 'root' }) }).pipe(archive);
    const stream = await docker.importImage(archive, {
      repo,
      tag: tagName,
      // Dockerfile instructions applied to the imported filesystem's config
      changes: [`LABEL ${RUN_LABEL}=${run}`, 'ENV PATH=/bin', 'CMD ["sh"]'],
    });
    const output = await new Promise<unknown[]>((resolve, reject) => {
      docker.modem.followProgress(stream, (err, out: unknown[]) => {
        if (err === null) resolve(out);
        else reject(err);
      });
    });
    const failure = output.find((o): o is { error: string } => typeof o === 'object' && o !== null && 'error' in o);
    if (failure !== undefined) throw new Error(`Importing the busybox base image failed: ${failure.error}`);
    const ours = output
      .map((o) => (typeof o === 'object' && o !== null && 'status' in o ? String(o.status) : ''))
      .find((s) => s.startsWith('sha256:'));
    const tagged = await docker.getImage(tag).inspect();
    if (ours !== undefined && tagged.Id !== ours) {
      // another process imported at the same moment and its image holds the tag now
      await docker.getImage(ours).remove().catch(() => undefined);
    }
    return tag;
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

async function exists(docker: Docker, ref: string): Promise<boolean> {
  try {
    await docker.getImage(ref).inspect();
    return true;
  } catch (err) {
    if (typeof err === 'object' && err !== null && 'statusCode' in err) {
      if (err.statusCode === 404) return false;
      throw err;
    }
    throw new Error(`Docker Engine does not answer (${String(err)}): run scripts/ensure-docker.sh first (make test does).`, { cause: err });
  }
}

/** A dynamically linked busybox (Debian's `busybox` package) would not run in an empty image. */
async function assertStaticBusybox(): Promise<void> {
  const missing = `${BUSYBOX} is missing or not statically linked: install Debian's busybox-static (scripts/ensure-docker.sh does).`;
  let header: Buffer;
  try {
    const file = await open(BUSYBOX, 'r');
    try {
      header = Buffer.alloc(4096);
      await file.read(header, 0, header.length, 0);
    } finally {
      await file.close();
    }
  } catch {
    throw new Error(missing);
  }
  // ELF64 little-endian: program headers at e_phoff (0x20), e_phentsize (0x36), e_phnum (0x38);
  // a PT_INTERP (3) entry names the dynamic loader.
  if (header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2) throw new Error(missing);
  const phoff = Number(header.readBigUInt64LE(0x20));
  const phentsize = header.readUInt16LE(0x36);
  const phnum = header.readUInt16LE(0x38);
  for (let i = 0; i < phnum && phoff + (i + 1) * phentsize <= header.length; i++) {
    if (header.readUInt32LE(phoff + i * phentsize) === 3) throw new Error(missing);
  }
}

/**
 * Removes every container, image, network and volume labelled with the run (containers made
 * from images built on the base image inherit its label).
 */
export async function removeTestRun(run: string, docker: Docker = new Docker()): Promise<void> {
  const label = [`${RUN_LABEL}=${run}`];
  const containers = await docker.listContainers({ all: true, filters: { label } });
  await Promise.all(containers.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true }).catch(ignore404)));
  for (const n of await docker.listNetworks({ filters: { label } })) await docker.getNetwork(n.Id).remove().catch(ignore404);
  const { Volumes: volumes } = await docker.listVolumes({ filters: { label } });
  for (const v of volumes) await docker.getVolume(v.Name).remove().catch(ignore404);
  // children before parents, in passes: a build the engine is still cancelling may hold one a moment
  for (let pass = 0; pass < 10; pass++) {
    const images = (await docker.listImages({ all: true, filters: { label } })).sort((a, b) => b.Created - a.Created);
    if (images.length === 0) return;
    for (const image of images) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  const left = await docker.listImages({ all: true, filters: { label } });
  if (left.length > 0) throw new Error(`Images of test run ${run} could not be removed: ${left.map((i) => i.Id).join(', ')}`);
}

/** For a test file run without the global setup: remove what its own run left. A shared run is the global teardown's. */
export async function releaseTestRun(docker: Docker = new Docker()): Promise<void> {
  if (sharedRunId() === undefined) await removeTestRun(ownRun, docker);
}

function ignore404(err: unknown): void {
  if (typeof err === 'object' && err !== null && 'statusCode' in err && err.statusCode === 404) return;
  throw err;
}

// vitest globalSetup: `globalSetup: ['test/factories/images.ts']` builds the image once per run.
interface SetupProject {
  provide(key: 'slipwayTestRun', value: string): void;
}

export async function setup(project: SetupProject): Promise<void> {
  const run = process.env['SLIPWAY_TEST_RUN'] ?? ownRun;
  process.env['SLIPWAY_TEST_RUN'] = run;
  project.provide('slipwayTestRun', run);
  await ensureBaseImage(new Docker(), run);
}

export async function teardown(): Promise<void> {
  const run = process.env['SLIPWAY_TEST_RUN'];
  if (run !== undefined) await removeTestRun(run);
}

const DB_IMAGES_SCRIPT = new URL('../../scripts/ensure-db-images.sh', import.meta.url).pathname;
let databaseImages: Promise<void> | null = null;

/**
 * The locally built database images (`slipway-local/postgresql|mysql|redis:latest`), built once
 * by `make test` before the suites (scripts/ensure-db-images.sh) and kept between runs: they carry
 * no run label. Checked here through the Engine API (each carries the SHA-256 of the script that
 * built it); the script runs only when one is missing or stale, once per process. An engine that
 * fails to answer fails the check instead of rebuilding the images under the other suites.
 */
export function ensureDatabaseImages(docker: Docker = new Docker()): Promise<void> {
  databaseImages ??= (async () => {
    const recipe = createHash('sha256').update(await readFile(DB_IMAGES_SCRIPT)).digest('hex');
    const labels = await Promise.all(
      ['postgresql', 'mysql', 'redis'].map(async (kind) => {
        try {
          return (await docker.getImage(`slipway-local/${kind}:latest`).inspect()).Config.Labels['slipway.local.recipe'];
        } catch (err) {
          if (typeof err === 'object' && err !== null && 'statusCode' in err && err.statusCode === 404) return undefined;
          throw err;
        }
      }),
    );
    if (labels.every((l) => l === recipe)) return;
    await promisify(execFile)('bash', [DB_IMAGES_SCRIPT], { maxBuffer: 16 * 1024 * 1024 });
  })();
  databaseImages.catch(() => (databaseImages = null));
  return databaseImages;
}

let nodeClients: Promise<string> | null = null;

/**
 * An image whose entrypoint is test/factories/node-db-client.ts with the official Node clients
 * (`pg`, `mysql2`, `ioredis`) bundled in by esbuild, run by this machine's own Node binary on the
 * locally built MariaDB image (a Debian root with the C++ runtime that binary needs). Built once
 * per process, labelled with the run (removed by its teardown).
 */
export function nodeClientImage(docker: Docker = new Docker()): Promise<string> {
  nodeClients ??= buildNodeClientImage(docker);
  return nodeClients;
}

async function buildNodeClientImage(docker: Docker): Promise<string> {
  const { build } = await import('esbuild');
  const run = testRunId();
  const tag = `slipway-test/node-clients:${run}`;
  if (await exists(docker, tag)) return tag;
  const dir = await mkdtemp(join(tmpdir(), 'slipway-node-clients-'));
  try {
    await build({
      entryPoints: [new URL('./node-db-client.ts', import.meta.url).pathname],
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      outfile: join(dir, 'client.cjs'),
      // pg's optional native binding is never used
      external: ['pg-native'],
      logLevel: 'error',
    });
    await copyFile(process.execPath, join(dir, 'node'));
    await chmod(join(dir, 'node'), 0o755);
    await writeFile(
      join(dir, 'Dockerfile'),
      ['FROM slipway-local/mysql:latest', 'COPY node /usr/local/bin/node', 'COPY client.cjs /app/client.cjs', `LABEL ${RUN_LABEL}=${run}`, 'ENTRYPOINT ["/usr/local/bin/node", "/app/client.cjs"]', ''].join('\n'),
    );
    const stream = await docker.buildImage({ context: dir, src: ['Dockerfile', 'node', 'client.cjs'] }, { t: tag, labels: { [RUN_LABEL]: run } });
    const output = await new Promise<unknown[]>((resolve, reject) => {
      docker.modem.followProgress(stream, (err, out: unknown[]) => {
        if (err === null) resolve(out);
        else reject(err);
      });
    });
    const failure = output.find((o): o is { error: string } => typeof o === 'object' && o !== null && 'error' in o);
    if (failure !== undefined) throw new Error(`Building the Node client image failed: ${failure.error}`);
    return tag;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
