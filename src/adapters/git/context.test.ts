import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BuildContextError, GENERATED_DOCKERFILE, prepareBuildContext, type BaseImages, type PrepareOptions } from './context.js';

const IMAGES: BaseImages = { node: 'node:20-alpine', go: 'golang:1.22', python: 'python:3.12-slim', static: 'slipway-test/busybox:1' };

const cleanup: string[] = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A checkout in a temp dir (real path), with the given files. */
async function checkout(files: Record<string, string>): Promise<string> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), 'slipway-ctx-')));
  cleanup.push(dir);
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  return dir;
}

const prepare = (checkoutDir: string, opts: Partial<PrepareOptions> = {}) => prepareBuildContext({ checkoutDir, baseImages: IMAGES, ...opts });

async function failure(p: Promise<unknown>): Promise<BuildContextError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof BuildContextError) return err;
    throw err;
  }
  throw new Error('expected a BuildContextError');
}

/** The generated Dockerfile of a prepared context. */
const dockerfileOf = async (ctx: { contextDir: string; dockerfile: string }) => readFile(join(ctx.contextDir, ctx.dockerfile), 'utf8');

const fromLine = (dockerfile: string) => dockerfile.split('\n').find((l) => l.startsWith('FROM '));

describe("the repository's Dockerfile", () => {
  it('is used where root_dir and dockerfile_path say', async () => {
    const dir = await checkout({ Dockerfile: 'FROM root\n', 'services/api/docker/Dockerfile.prod': 'FROM api\n', 'services/api/main.go': '' });
    expect(await prepare(dir)).toEqual({ contextDir: dir, dockerfile: 'Dockerfile', strategy: 'dockerfile', description: 'Building with Dockerfile from the repository.' });

    const ctx = await prepare(dir, { rootDir: './services/api/', dockerfilePath: 'docker/Dockerfile.prod' });
    expect(ctx).toEqual({
      contextDir: join(dir, 'services', 'api'),
      dockerfile: 'docker/Dockerfile.prod',
      strategy: 'dockerfile',
      description: 'Building with services/api/docker/Dockerfile.prod from the repository.',
    });
  });

  it('may be a symbolic link inside the repository, or lie outside root_dir (then a copy is sent)', async () => {
    const dir = await checkout({ 'docker/Dockerfile': 'FROM linked\n', 'app/index.html': 'x' });
    await symlink('docker/Dockerfile', join(dir, 'Dockerfile'));
    const linked = await prepare(dir);
    expect(linked.dockerfile).toBe('docker/Dockerfile');

    const outside = await prepare(dir, { rootDir: 'app', dockerfilePath: '../docker/Dockerfile' });
    expect(outside).toMatchObject({ contextDir: join(dir, 'app'), dockerfile: GENERATED_DOCKERFILE, strategy: 'dockerfile' });
    expect(await dockerfileOf(outside)).toBe('FROM linked\n');
  });

  it('is re-included when the repository .dockerignore would leave it out', async () => {
    const dir = await checkout({ Dockerfile: 'FROM x\n', '.dockerignore': 'Dockerfile\n*.md' });
    await prepare(dir);
    expect((await readFile(join(dir, '.dockerignore'), 'utf8')).trim().split('\n').at(-1)).toBe('!Dockerfile');

    const generated = await checkout({ 'index.html': 'hi', '.dockerignore': '*\n!index.html\n' });
    await prepare(generated);
    expect((await readFile(join(generated, '.dockerignore'), 'utf8')).trim().split('\n').at(-1)).toBe(`!${GENERATED_DOCKERFILE}`);
  });
});

describe('paths that leave the repository', () => {
  it('are refused when they climb out with .. or are absolute', async () => {
    const dir = await checkout({ Dockerfile: 'FROM x\n', 'app/Dockerfile': 'FROM y\n' });
    const cases: Partial<PrepareOptions>[] = [
      { rootDir: '..' },
      { rootDir: 'app/../../x' },
      { rootDir: '/etc' },
      { dockerfilePath: '../Dockerfile' },
      { rootDir: 'app', dockerfilePath: '../../../etc/passwd' },
      { dockerfilePath: '/etc/passwd' },
    ];
    for (const c of cases) {
      const err = await failure(prepare(dir, c));
      expect(err.code).toBe('outside_repository');
      expect(err.message).toMatch(/^(root_dir|dockerfile_path) ".*" (points outside the repository|must be a path inside the repository, not an absolute path)\.$/);
    }
  });

  it('are refused when a symbolic link points outside', async () => {
    const outside = await checkout({ Dockerfile: 'FROM secret\n', 'package.json': '{"scripts":{"start":"node x"}}', 'site/index.html': 'x' });
    const dir = await checkout({ 'web/index.html': 'x' });
    await symlink(join(outside, 'site'), join(dir, 'app'));
    await symlink(join(outside, 'Dockerfile'), join(dir, 'Dockerfile'));
    await symlink(`../../${basename(outside)}/package.json`, join(dir, 'web', 'package.json'));

    const root = await failure(prepare(dir, { rootDir: 'app' }));
    expect(root).toMatchObject({ code: 'outside_repository', message: 'root_dir "app" is a symbolic link that points outside the repository.' });
    const dockerfile = await failure(prepare(dir));
    expect(dockerfile).toMatchObject({ code: 'outside_repository', message: 'dockerfile_path "Dockerfile" is a symbolic link that points outside the repository.' });
    // detection reads files too: a package.json link to elsewhere is never read
    const detected = await failure(prepare(dir, { rootDir: 'web' }));
    expect(detected).toMatchObject({ code: 'outside_repository', message: '"web/package.json" is a symbolic link that points outside the repository.' });
  });

  it('says when root_dir is missing, or dockerfile_path is a directory or a dangling link', async () => {
    const dir = await checkout({ Dockerfile: 'FROM x\n', 'docker/x': '' });
    expect(await failure(prepare(dir, { rootDir: 'nope' }))).toMatchObject({ code: 'not_found', message: 'root_dir "nope" is not a directory of the repository.' });
    expect(await failure(prepare(dir, { dockerfilePath: 'docker' }))).toMatchObject({ code: 'not_found', message: 'dockerfile_path "docker" is not a file.' });
    await symlink('missing', join(dir, 'Dangling'));
    expect(await failure(prepare(dir, { dockerfilePath: 'Dangling' }))).toMatchObject({
      code: 'outside_repository',
      message: 'dockerfile_path "Dangling" is a symbolic link to nothing inside the repository.',
    });
  });

  it('follows a root_dir link that stays inside, and sends the real directory', async () => {
    const dir = await checkout({ 'src/site/index.html': 'hi' });
    await symlink('src/site', join(dir, 'site'));
    const ctx = await prepare(dir, { rootDir: 'site' });
    expect(ctx).toMatchObject({ contextDir: join(dir, 'src', 'site'), strategy: 'static' });
  });
});

describe('a generated Dockerfile', () => {
  it('for Node: npm ci with a lockfile, npm start, the Node base image and PORT', async () => {
    const dir = await checkout({
      'package.json': JSON.stringify({ name: 'a', scripts: { start: 'node server.js', build: 'tsc' } }),
      'package-lock.json': '{}',
    });
    const ctx = await prepare(dir, { port: 3000 });
    expect(ctx).toMatchObject({ contextDir: dir, dockerfile: GENERATED_DOCKERFILE, strategy: 'node' });
    expect(ctx.description).toBe('No Dockerfile at Dockerfile: generated one for a Node.js app (npm ci; npm start) from node:20-alpine.');
    const text = await dockerfileOf(ctx);
    expect(fromLine(text)).toBe('FROM node:20-alpine');
    expect(text).toContain('COPY package.json package-lock.json ./\nRUN npm ci\nCOPY . .\nRUN npm run build\n');
    expect(text).toContain('ENV PORT=3000\nEXPOSE 3000\nCMD ["npm","start"]\n');
  });

  it('for Node without a start script: the main file, and npm install without a lockfile', async () => {
    const dir = await checkout({ 'package.json': JSON.stringify({ main: './lib/app.js' }), 'lib/app.js': '' });
    const text = await dockerfileOf(await prepare(dir));
    expect(text).toContain('RUN npm install\n');
    expect(text).toContain('CMD ["node","lib/app.js"]');

    const nothing = await checkout({ 'package.json': '{}' });
    expect((await failure(prepare(nothing))).code).toBe('invalid_project');
    const broken = await checkout({ 'package.json': '{"scripts":' });
    expect(await failure(prepare(broken))).toMatchObject({ code: 'invalid_project', message: 'package.json is not a valid JSON object.' });
  });

  it('for Go: go build of the main package, the Go base image and PORT', async () => {
    const dir = await checkout({ 'go.mod': 'module example.com/app\n\ngo 1.22\n', 'main.go': 'package main\n\nfunc main() {}\n' });
    const ctx = await prepare(dir);
    expect(ctx.strategy).toBe('go');
    const text = await dockerfileOf(ctx);
    expect(fromLine(text)).toBe('FROM golang:1.22');
    expect(text).toContain('COPY go.mod ./\nRUN go mod download\nCOPY . .\nRUN CGO_ENABLED=0 go build -o /usr/local/bin/app .\n');
    expect(text).toContain('ENV PORT=8080\nEXPOSE 8080\nCMD ["/usr/local/bin/app"]\n');

    const cmd = await checkout({ 'go.mod': 'module m\n', 'go.sum': '', 'cmd/server/main.go': 'package main\n', 'lib.go': 'package m\n' });
    const cmdText = await dockerfileOf(await prepare(cmd));
    expect(cmdText).toContain('COPY go.mod go.sum ./');
    expect(cmdText).toContain('go build -o /usr/local/bin/app ./cmd/server\n');
  });

  it('for Python: requirements, a server bound to $PORT, the Python base image', async () => {
    const dir = await checkout({ 'requirements.txt': 'Flask==3.0\ngunicorn>=21\n', 'app.py': 'app = None\n' });
    const ctx = await prepare(dir);
    expect(ctx.strategy).toBe('python');
    const text = await dockerfileOf(ctx);
    expect(fromLine(text)).toBe('FROM python:3.12-slim');
    expect(text).toContain('COPY requirements.txt ./\nRUN pip install -r requirements.txt\nCOPY . .\n');
    expect(text).toContain('ENV PORT=8080\nEXPOSE 8080\nCMD ["sh","-c","exec gunicorn --bind 0.0.0.0:$PORT app:app"]\n');

    const project = await checkout({ 'pyproject.toml': '[project]\nname = "x"\n', 'main.py': 'print(1)\n' });
    const projectText = await dockerfileOf(await prepare(project));
    expect(projectText).toContain('COPY . .\nRUN pip install .\n');
    expect(projectText).toContain('CMD ["python","main.py"]');

    const none = await checkout({ 'requirements.txt': '' });
    expect((await failure(prepare(none))).message).toBe('No start command for this Python app: add main.py or app.py, or a Procfile with a "web:" line.');
  });

  it('reads a requirements.txt of 1 MiB of blank lines in linear time (issue 26)', async () => {
    const dir = await checkout({ 'requirements.txt': `${'\n'.repeat(1024 * 1024 - 20)}gunicorn>=21\n`, 'app.py': 'app = None\n' });
    const started = performance.now();
    const text = await dockerfileOf(await prepare(dir));
    // a pattern whose leading white space spans lines took minutes (80 s for 200,000 of them)
    expect(performance.now() - started).toBeLessThan(2000);
    expect(text).toContain('exec gunicorn --bind 0.0.0.0:$PORT app:app');
  });

  it('for static files: the configured busybox image serving /site on $PORT', async () => {
    const dir = await checkout({ 'public/index.html': '<h1>hi</h1>', 'public/style.css': '' });
    const ctx = await prepare(dir, { rootDir: 'public', port: 8081 });
    expect(ctx).toMatchObject({ contextDir: join(dir, 'public'), strategy: 'static' });
    expect(ctx.description).toBe('No Dockerfile at public/Dockerfile: generated one for static files (busybox httpd) from slipway-test/busybox:1.');
    const text = await dockerfileOf(ctx);
    expect(fromLine(text)).toBe('FROM slipway-test/busybox:1');
    expect(text).toContain(`COPY . /site\nRUN rm -f /site/${GENERATED_DOCKERFILE}\nENV PORT=8081\nEXPOSE 8081\nCMD ["sh","-c","exec busybox httpd -f -v -p \\"$PORT\\" -h /site"]\n`);
  });

  it("runs a Procfile's web process through sh, so that $PORT expands", async () => {
    const dir = await checkout({ 'package.json': '{"scripts":{"start":"x"}}', Procfile: 'worker: node worker.js\nweb: node web.js --port $PORT\n' });
    expect(await dockerfileOf(await prepare(dir))).toContain('CMD ["sh","-c","exec node web.js --port $PORT"]');
  });

  it('prefers the first stack found, and says when none is', async () => {
    const both = await checkout({ 'package.json': '{"scripts":{"start":"x"}}', 'index.html': '' });
    expect((await prepare(both)).strategy).toBe('node');
    const empty = await checkout({ 'README.md': '' });
    expect(await failure(prepare(empty))).toMatchObject({
      code: 'no_stack',
      message: 'No Dockerfile at Dockerfile, and no app was recognised in the repository root (looked for package.json, go.mod, requirements.txt or pyproject.toml, index.html).',
    });
  });

  it('refuses a base image that is not an image reference', async () => {
    const dir = await checkout({ 'index.html': '' });
    const err = await failure(prepare(dir, { baseImages: { ...IMAGES, static: 'busybox\nRUN rm -rf /' } }));
    expect(err.code).toBe('invalid');
  });
});
