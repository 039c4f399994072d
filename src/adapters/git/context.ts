// The build context of a checkout: `root_dir` and `dockerfile_path` resolved without leaving the
// repository, and, where the repository has no Dockerfile, one generated for the detected stack.
import { appendFile, lstat, readFile, readdir, realpath, stat, writeFile } from 'node:fs/promises';
import { isAbsolute, join, posix, relative, sep } from 'node:path';
import type { BaseImages, BuildContext, BuildStrategy, PrepareBuildContext, PrepareOptions } from '../../domain/ports.js';

export type { BaseImages, BuildContext, BuildStrategy, PrepareOptions } from '../../domain/ports.js';

export const DEFAULT_BASE_IMAGES: BaseImages = {
  node: 'node:20-alpine',
  go: 'golang:1.22',
  python: 'python:3.12-slim',
  static: 'busybox:1.36',
};

export type BuildContextErrorCode =
  /** a path leaves the repository (`..`, absolute, or a symbolic link pointing outside) */
  | 'outside_repository'
  | 'not_found'
  /** no Dockerfile and no stack recognised */
  | 'no_stack'
  /** the stack was recognised but cannot be built as it is (no start command, unreadable package.json) */
  | 'invalid_project'
  | 'invalid';

/** One sentence for the deployment's `error`. */
export class BuildContextError extends Error {
  constructor(
    readonly code: BuildContextErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'BuildContextError';
  }
}

/** The name of a Dockerfile Slipway writes into the context (generated, or copied from outside it). */
export const GENERATED_DOCKERFILE = 'Dockerfile.slipway';
const READ_LIMIT = 1024 * 1024;

export const prepareBuildContext: PrepareBuildContext = async function prepareBuildContext(opts: PrepareOptions): Promise<BuildContext> {
  const port = opts.port ?? 8080;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new BuildContextError('invalid', `The port ${port} must be a whole number from 1 to 65535.`);
  const images = checkImages(opts.baseImages);
  const repo = await realpath(opts.checkoutDir);
  const rootDir = cleanRelative(opts.rootDir ?? '', 'root_dir');
  const dockerfilePath = (opts.dockerfilePath ?? 'Dockerfile').replace(/\\/g, '/');
  // relative to root_dir, so "../Dockerfile" is fine as long as it stays in the repository
  const lexical = cleanRelative(posix.join(rootDir === '' ? '.' : rootDir, dockerfilePath), 'dockerfile_path', dockerfilePath);
  if (lexical === '' || dockerfilePath.endsWith('/')) throw new BuildContextError('invalid', 'dockerfile_path must name a file.');

  const contextDir = await resolveInRepo(repo, rootDir, `root_dir "${rootDir}"`);
  if (contextDir === undefined || !(await stat(contextDir)).isDirectory()) {
    throw new BuildContextError('not_found', `root_dir "${rootDir}" is not a directory of the repository.`);
  }
  const shownDockerfile = rootDir === '' ? dockerfilePath : `${rootDir}/${dockerfilePath}`;
  const dockerfile = await resolveInRepo(repo, lexical, `dockerfile_path "${dockerfilePath}"`);
  if (dockerfile !== undefined) {
    if (!(await stat(dockerfile)).isFile()) throw new BuildContextError('not_found', `dockerfile_path "${shownDockerfile}" is not a file.`);
    // contextDir is a real path, so a Dockerfile found inside it is a plain file of the tar the
    // engine receives; one kept outside root_dir is not sent at all: send a copy
    const inside = relative(contextDir, dockerfile);
    if (!climbsOut(inside)) {
      const rel = inside.split(sep).join('/');
      await keepInContext(contextDir, rel);
      return { contextDir, dockerfile: rel, strategy: 'dockerfile', description: `Building with ${shownDockerfile} from the repository.` };
    }
    await writeFile(join(contextDir, GENERATED_DOCKERFILE), await readFile(dockerfile));
    await keepInContext(contextDir, GENERATED_DOCKERFILE);
    return { contextDir, dockerfile: GENERATED_DOCKERFILE, strategy: 'dockerfile', description: `Building with ${shownDockerfile} from the repository.` };
  }

  const files = new ContextFiles(repo, contextDir);
  const plan = await detect(files, images, port);
  if (plan === undefined) {
    throw new BuildContextError(
      'no_stack',
      `No Dockerfile at ${shownDockerfile}, and no app was recognised in ${rootDir === '' ? 'the repository root' : `"${rootDir}"`} (looked for package.json, go.mod, requirements.txt or pyproject.toml, index.html).`,
    );
  }
  await writeFile(join(contextDir, GENERATED_DOCKERFILE), plan.dockerfile);
  await keepInContext(contextDir, GENERATED_DOCKERFILE);
  return {
    contextDir,
    dockerfile: GENERATED_DOCKERFILE,
    strategy: plan.strategy,
    description: `No Dockerfile at ${shownDockerfile}: generated one for ${plan.summary}.`,
  };
};

interface Plan {
  strategy: Exclude<BuildStrategy, 'dockerfile'>;
  summary: string;
  dockerfile: string;
}

async function detect(files: ContextFiles, images: BaseImages, port: number): Promise<Plan | undefined> {
  const procfile = await webProcess(files);
  if (await files.exists('package.json')) return node(files, images.node, port, procfile);
  if (await files.exists('go.mod')) return go(files, images.go, port, procfile);
  if ((await files.exists('requirements.txt')) || (await files.exists('pyproject.toml'))) return python(files, images.python, port, procfile);
  if (await files.exists('index.html')) return staticSite(images.static, port);
  return undefined;
}

async function node(files: ContextFiles, image: string, port: number, procfile: string | undefined): Promise<Plan> {
  let pkg: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(await files.read('package.json'));
    if (!isObject(parsed)) throw new Error('not an object');
    pkg = parsed;
  } catch (err) {
    if (err instanceof BuildContextError) throw err;
    throw new BuildContextError('invalid_project', 'package.json is not a valid JSON object.');
  }
  const scripts = isObject(pkg['scripts']) ? pkg['scripts'] : {};
  const manifests = ['package.json'];
  let install: string;
  if (await files.exists('package-lock.json')) {
    manifests.push('package-lock.json');
    install = 'npm ci';
  } else if (await files.exists('npm-shrinkwrap.json')) {
    manifests.push('npm-shrinkwrap.json');
    install = 'npm ci';
  } else if (await files.exists('yarn.lock')) {
    manifests.push('yarn.lock');
    install = 'yarn install --frozen-lockfile';
  } else if (await files.exists('pnpm-lock.yaml')) {
    manifests.push('pnpm-lock.yaml');
    install = 'corepack enable && pnpm install --frozen-lockfile';
  } else {
    install = 'npm install';
  }

  let start: { cmd: string[]; shown: string } | undefined;
  if (procfile !== undefined) start = shellStart(procfile);
  // `npm start` without a start script runs `node server.js`
  else if (typeof scripts['start'] === 'string' || (await files.exists('server.js'))) start = { cmd: ['npm', 'start'], shown: 'npm start' };
  else {
    const candidates = [typeof pkg['main'] === 'string' ? pkg['main'] : undefined, 'index.js', 'app.js', 'main.js'];
    for (const c of candidates) {
      if (c !== undefined && (await files.exists(c))) {
        start = { cmd: ['node', posix.normalize(c)], shown: `node ${posix.normalize(c)}` };
        break;
      }
    }
  }
  if (start === undefined) {
    throw new BuildContextError('invalid_project', 'package.json has no "start" script, and there is no server.js, index.js or "main" file to run.');
  }
  const lines = [
    header(`a Node.js app: ${install}, then ${start.shown}`),
    `FROM ${image}`,
    'WORKDIR /app',
    `COPY ${manifests.join(' ')} ./`,
    `RUN ${install}`,
    'COPY . .',
    ...(typeof scripts['build'] === 'string' ? ['RUN npm run build'] : []),
    'ENV NODE_ENV=production',
    ...portLines(port),
    `CMD ${JSON.stringify(start.cmd)}`,
  ];
  return { strategy: 'node', summary: `a Node.js app (${install}; ${start.shown}) from ${image}`, dockerfile: lines.join('\n') + '\n' };
}

async function go(files: ContextFiles, image: string, port: number, procfile: string | undefined): Promise<Plan> {
  const manifests = ['go.mod', ...((await files.exists('go.sum')) ? ['go.sum'] : [])];
  let pkg = '.';
  if (!(await files.rootHasGoMain())) {
    const commands = await files.list('cmd');
    for (const name of commands.sort()) {
      if (await files.exists(`cmd/${name}/main.go`)) {
        pkg = `./cmd/${name}`;
        break;
      }
    }
  }
  const start = procfile === undefined ? { cmd: ['/usr/local/bin/app'], shown: `the binary built from ${pkg}` } : shellStart(procfile);
  const lines = [
    header(`a Go app: go build ${pkg}, then ${start.shown}`),
    `FROM ${image}`,
    'WORKDIR /src',
    `COPY ${manifests.join(' ')} ./`,
    'RUN go mod download',
    'COPY . .',
    `RUN CGO_ENABLED=0 go build -o /usr/local/bin/app ${pkg}`,
    ...portLines(port),
    `CMD ${JSON.stringify(start.cmd)}`,
  ];
  return { strategy: 'go', summary: `a Go app (go build ${pkg}) from ${image}`, dockerfile: lines.join('\n') + '\n' };
}

async function python(files: ContextFiles, image: string, port: number, procfile: string | undefined): Promise<Plan> {
  const hasRequirements = await files.exists('requirements.txt');
  const hasPyproject = await files.exists('pyproject.toml');
  const requirements = hasRequirements ? (await files.read('requirements.txt')).toLowerCase() : '';
  // indentation only: `\s*` would span blank lines, and retried at each of 1 MiB of them is quadratic (issue 26)
  const uses = (dist: string) => new RegExp(`^[ \\t]*${dist}\\b`, 'm').test(requirements);
  const modules: string[] = [];
  for (const m of ['app', 'main', 'wsgi', 'asgi', 'server']) if (await files.exists(`${m}.py`)) modules.push(m);

  let start: { cmd: string[]; shown: string } | undefined;
  if (procfile !== undefined) start = shellStart(procfile);
  else if (uses('gunicorn') && modules[0] !== undefined) start = shellStart(`gunicorn --bind 0.0.0.0:$PORT ${modules[0]}:app`);
  else if (uses('uvicorn') && modules[0] !== undefined) start = shellStart(`uvicorn ${modules[0]}:app --host 0.0.0.0 --port $PORT`);
  else {
    const script = ['main', 'app', 'server'].find((m) => modules.includes(m));
    if (script !== undefined) start = { cmd: ['python', `${script}.py`], shown: `python ${script}.py` };
  }
  if (start === undefined) {
    throw new BuildContextError('invalid_project', 'No start command for this Python app: add main.py or app.py, or a Procfile with a "web:" line.');
  }
  const install = hasRequirements ? 'pip install -r requirements.txt' : 'pip install .';
  const lines = [
    header(`a Python app: ${install}, then ${start.shown}`),
    `FROM ${image}`,
    'WORKDIR /app',
    'ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1',
    ...(hasRequirements ? ['COPY requirements.txt ./', 'RUN pip install -r requirements.txt', 'COPY . .'] : []),
    ...(!hasRequirements && hasPyproject ? ['COPY . .', 'RUN pip install .'] : []),
    ...portLines(port),
    `CMD ${JSON.stringify(start.cmd)}`,
  ];
  return { strategy: 'python', summary: `a Python app (${install}; ${start.shown}) from ${image}`, dockerfile: lines.join('\n') + '\n' };
}

function staticSite(image: string, port: number): Plan {
  const serve = 'exec busybox httpd -f -v -p "$PORT" -h /site';
  const lines = [
    header('static files served by busybox httpd on $PORT'),
    `FROM ${image}`,
    'COPY . /site',
    // the site should not publish how it was built
    `RUN rm -f /site/${GENERATED_DOCKERFILE}`,
    ...portLines(port),
    `CMD ${JSON.stringify(['sh', '-c', serve])}`,
  ];
  return { strategy: 'static', summary: `static files (busybox httpd) from ${image}`, dockerfile: lines.join('\n') + '\n' };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const header = (what: string): string => `# Generated by Slipway for ${what}.\n# The app listens on $PORT (set when the container starts).`;

/** PORT has a default in the image; the container's environment overrides it. */
const portLines = (port: number): string[] => [`ENV PORT=${port}`, `EXPOSE ${port}`];

/** A command run by sh, so that `$PORT` and friends expand when the container starts. */
const shellStart = (command: string): { cmd: string[]; shown: string } => ({ cmd: ['sh', '-c', `exec ${command}`], shown: command });

/** The `web:` process of a Heroku-style Procfile, which overrides the stack's own start command. */
async function webProcess(files: ContextFiles): Promise<string | undefined> {
  if (!(await files.exists('Procfile'))) return undefined;
  const line = (await files.read('Procfile')).split(/\r?\n/).find((l) => /^web\s*:/.test(l));
  const command = line?.replace(/^web\s*:\s*/, '').trim();
  return command === undefined || command === '' ? undefined : command;
}

/**
 * A repository's .dockerignore filters what the engine receives (packBuildContext applies it); the
 * Docker CLI always sends the Dockerfile anyway, so re-include it the same way.
 */
async function keepInContext(contextDir: string, dockerfile: string): Promise<void> {
  const ignore = join(contextDir, '.dockerignore');
  let info;
  try {
    info = await lstat(ignore);
  } catch {
    return;
  }
  if (!info.isFile()) return;
  await appendFile(ignore, `\n# added by Slipway: the Dockerfile must reach the engine\n!${dockerfile}\n`);
}

/** Reads the files detection looks at, each checked to stay inside the repository. */
class ContextFiles {
  constructor(
    private readonly repo: string,
    private readonly dir: string,
  ) {}

  private async resolve(name: string): Promise<string | undefined> {
    const rel = relative(this.repo, join(this.dir, ...name.split('/'))).split(sep).join('/');
    return resolveInRepo(this.repo, cleanRelative(rel, name), `"${rel}"`);
  }

  async exists(name: string): Promise<boolean> {
    if (!isCleanRelative(name)) return false;
    const path = await this.resolve(name);
    return path !== undefined && (await stat(path)).isFile();
  }

  async read(name: string): Promise<string> {
    const path = await this.resolve(name);
    if (path === undefined) throw new BuildContextError('not_found', `${name} was not found.`);
    const info = await stat(path);
    if (!info.isFile() || info.size > READ_LIMIT) throw new BuildContextError('invalid_project', `${name} is not a readable file of at most 1 MiB.`);
    return readFile(path, 'utf8');
  }

  async list(name: string): Promise<string[]> {
    const path = await this.resolve(name);
    if (path === undefined || !(await stat(path)).isDirectory()) return [];
    return (await readdir(path, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  }

  async rootHasGoMain(): Promise<boolean> {
    for (const entry of await readdir(this.dir, { withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.go') || entry.name.endsWith('_test.go')) continue;
      const source = await this.read(entry.name).catch(() => '');
      if (/^package\s+main\b/m.test(source)) return true;
    }
    return false;
  }
}

const isCleanRelative = (p: string): boolean => {
  try {
    cleanRelative(p, p);
    return true;
  } catch {
    return false;
  }
};

/**
 * "", "app", "app/web": normalised, "/"-separated, never absolute nor climbing out with "..".
 * `shown` is the value as the user gave it, for the message.
 */
function cleanRelative(path: string, field: string, shown = path): string {
  if (path.includes('\0')) throw new BuildContextError('invalid', `${field} contains a NUL character.`);
  const unixy = path.replace(/\\/g, '/');
  if (posix.isAbsolute(unixy) || /^[A-Za-z]:\//.test(unixy) || posix.isAbsolute(shown)) {
    throw new BuildContextError('outside_repository', `${field} "${shown}" must be a path inside the repository, not an absolute path.`);
  }
  const normal = posix.normalize(unixy === '' ? '.' : unixy).replace(/\/+$/, '');
  if (normal === '..' || normal.startsWith('../')) {
    throw new BuildContextError('outside_repository', `${field} "${shown}" points outside the repository.`);
  }
  return normal === '.' ? '' : normal;
}

/**
 * The real path of `rel` inside the repository, or undefined when nothing is there. Symbolic
 * links are followed and must end inside the repository too. `what` names it in messages.
 */
async function resolveInRepo(repo: string, rel: string, what: string): Promise<string | undefined> {
  // rel is clean (cleanRelative) by now
  const candidate = rel === '' ? repo : join(repo, ...rel.split('/'));
  let real: string;
  try {
    real = await realpath(candidate);
  } catch (err) {
    if (isCode(err, 'ENOENT') || isCode(err, 'ENOTDIR')) {
      if (await isLink(candidate)) throw new BuildContextError('outside_repository', `${what} is a symbolic link to nothing inside the repository.`);
      return undefined;
    }
    if (isCode(err, 'ELOOP')) throw new BuildContextError('outside_repository', `${what} is a loop of symbolic links.`);
    throw err;
  }
  if (climbsOut(relative(repo, real))) {
    throw new BuildContextError('outside_repository', `${what} is a symbolic link that points outside the repository.`);
  }
  return real;
}

const climbsOut = (rel: string): boolean => rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel);

async function isLink(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isSymbolicLink();
  } catch {
    return false;
  }
}

const isCode = (err: unknown, code: string): boolean => typeof err === 'object' && err !== null && 'code' in err && err.code === code;

/** An image reference goes into a Dockerfile line: nothing but a reference may get there. */
function checkImages(images: BaseImages): BaseImages {
  for (const [stack, ref] of Object.entries(images) as [keyof BaseImages, string][]) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$/.test(ref)) throw new BuildContextError('invalid', `The ${stack} base image "${ref}" is not an image reference.`);
  }
  return images;
}
