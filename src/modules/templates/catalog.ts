import { readFileSync } from 'node:fs';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { REFERENCE_FIELDS } from '../databases/references.js';
import { DATABASE_TYPES } from '../../domain/database.js';
import { CPU_BOUNDS, DECIMAL_PATTERN, inBounds, RAM_BOUNDS } from '../projects/resources.js';

/**
 * The template catalog (docs/templates.md): real self-hosted apps Slipway instantiates in one
 * call. It ships as a JSON file (catalog/templates.json) with this one schema, which also gives
 * the catalog route its response schema; `--template-catalog` adds or replaces entries from
 * another file. Every file is checked at start: a bad entry stops the start, named with its field.
 */

const EnvHint = Type.Object(
  {
    key: Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'The variable.' }),
    placeholder: Type.String({ description: 'A hint for the value (an example, or what it is).' }),
  },
  { additionalProperties: false },
);

const OptionalEnv = Type.Object(
  {
    key: Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }),
    placeholder: Type.String(),
    description: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

const Build = Type.Object(
  {
    /** the Git branch built by `mode: build` (default main) */
    branch: Type.Optional(Type.String({ minLength: 1 })),
    /** the Dockerfile, relative to root_dir (default Dockerfile) */
    dockerfile: Type.Optional(Type.String({ minLength: 1 })),
    root_dir: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

/** One entry of a catalog file. */
export const CatalogEntrySchema = Type.Object(
  {
    key: Type.String({ pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$', description: 'Sent as `template_name`.' }),
    name: Type.String({ minLength: 1, maxLength: 100 }),
    description: Type.String({ minLength: 1, maxLength: 500 }),
    category: Type.String({ minLength: 1, maxLength: 40 }),
    website: Type.String({ pattern: '^https?://', description: "The app's home page." }),
    source: Type.String({ pattern: '^https?://[^/]+/[^/]+/[^/]+$', description: "URL of the app's source repository (what `mode: build` builds)." }),
    image: Type.String({ minLength: 3, description: 'The image `mode: image` runs, pinned to a version (never `latest`).' }),
    version: Type.String({ minLength: 1, description: "The app's version that the image is." }),
    default_port: Type.String({ pattern: '^[1-9][0-9]{0,4}$', description: 'The port the app listens on.' }),
    default_cpu: Type.String({ pattern: DECIMAL_PATTERN, description: 'vCPU.' }),
    default_ram: Type.String({ pattern: DECIMAL_PATTERN, description: 'GiB.' }),
    required_envs: Type.Array(EnvHint, { description: 'What the user must set before the first deploy.' }),
    optional_envs: Type.Array(OptionalEnv, { description: 'What the user may set.' }),
    databases: Type.Array(Type.Unsafe<(typeof DATABASE_TYPES)[number]>({ type: 'string', enum: [...DATABASE_TYPES] }), { maxItems: 1, description: 'The database it needs (at most one), provisioned with the instance.' }),
    /** preset variables: generators (`${password:32}`, `${hex:64}`, `${base64:32}`, `${uuid}`), `${url}`, `${domain}`, `${{databases.<type>.<field>}}` */
    env: Type.Record(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }), Type.String()),
    /** paths in the container that keep data: a named volume each, per instance */
    volumes: Type.Array(Type.String({ pattern: '^/' })),
    /** replaces the image's command (an argument vector, never a shell string), where its docs say to run it so */
    command: Type.Optional(Type.Array(Type.String(), { minItems: 1 })),
    /** the path the deploy's health check and uptime checks ask (default: any answer on the port) */
    health_path: Type.Optional(Type.String({ pattern: '^/' })),
    build: Type.Optional(Build),
  },
  { additionalProperties: false },
);

export type CatalogEntry = Static<typeof CatalogEntrySchema>;

/** The fields GET …/available-templates shows: the spec's, plus image, category, website, version, databases, optional_envs. */
export const PUBLIC_FIELDS = ['name', 'key', 'description', 'source', 'default_port', 'default_cpu', 'default_ram', 'required_envs', 'image', 'category', 'website', 'version', 'databases', 'optional_envs'] as const;

export const CatalogViewSchema = Type.Pick(CatalogEntrySchema, [...PUBLIC_FIELDS]);
export type CatalogView = Static<typeof CatalogViewSchema>;

/** `${password:32}`, `${hex:64}`, `${base64:32}`, `${uuid}`: filled once at instantiation, kept as secrets. */
export const GENERATOR = /\$\{(password|hex|base64):([0-9]{1,3})\}|\$\{uuid\}/g;
/** `${{databases.<type>.<field>}}`: the database the template declared. */
export const TEMPLATE_DB_REF = /\$\{\{\s*databases\.([a-z]+)\.([a-z_]+)\s*\}\}/g;
const ANY_PLACEHOLDER = /\$\{\{?[^}]*\}?\}/g;

const DB_FIELDS: readonly string[] = REFERENCE_FIELDS;

export class CatalogError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`The template catalog ${file} has ${problems.length.toString()} problem(s):\n${problems.map((p) => `- ${p}`).join('\n')}`);
  }
}

/**
 * What is wrong with the entries of one file, each sentence naming the entry (its key, or its
 * position) and the field. Structure comes from the schema; the rest is what a schema cannot say.
 */
export function catalogProblems(data: unknown): string[] {
  if (!Array.isArray(data)) return ['the file must hold a JSON array of entries.'];
  const problems: string[] = [];
  const seen = new Set<string>();
  data.forEach((raw: unknown, i) => {
    const key = typeof raw === 'object' && raw !== null && 'key' in raw && typeof raw.key === 'string' ? raw.key : null;
    const where = key === null ? `entry ${String(i + 1)}` : `entry "${key}"`;
    if (!Value.Check(CatalogEntrySchema, raw)) {
      for (const e of Value.Errors(CatalogEntrySchema, raw)) {
        const path = e.instancePath === '' ? '' : ` field ${e.instancePath.replace(/^\//, '').replace(/\//g, '.')}`;
        // an unknown field is said once, by its name
        if (e.message === 'must not have additional properties') continue;
        problems.push(`${where}${path}: ${e.message === 'schema is false' ? 'is not a field of a catalog entry' : e.message}.`);
      }
      return;
    }
    const entry = raw;
    if (seen.has(entry.key)) problems.push(`${where}: the key is used by an earlier entry.`);
    seen.add(entry.key);
    const tag = imageTag(entry.image);
    if (tag === null) problems.push(`${where} field image: "${entry.image}" must be pinned to a version (repository:tag or @sha256:…).`);
    else if (tag === 'latest' || tag === 'stable' || tag === 'main' || tag === 'master' || tag === 'nightly' || tag === 'edge') problems.push(`${where} field image: "${entry.image}" must be pinned to a version, not "${tag}".`);
    const port = Number(entry.default_port);
    if (port > 65535) problems.push(`${where} field default_port: ${entry.default_port} is not a port.`);
    if (!inBounds(entry.default_cpu, CPU_BOUNDS)) problems.push(`${where} field default_cpu: ${entry.default_cpu} must be from ${String(CPU_BOUNDS.min)} to ${String(CPU_BOUNDS.max)} vCPU.`);
    if (!inBounds(entry.default_ram, RAM_BOUNDS)) problems.push(`${where} field default_ram: ${entry.default_ram} must be from ${String(RAM_BOUNDS.min)} to ${String(RAM_BOUNDS.max)} GiB.`);
    const keys = new Set<string>();
    for (const [k, value] of Object.entries(entry.env)) {
      keys.add(k);
      for (const p of placeholderProblems(value, entry.databases)) problems.push(`${where} field env.${k}: ${p}`);
    }
    for (const [i2, r] of entry.required_envs.entries()) {
      if (keys.has(r.key)) problems.push(`${where} field required_envs.${String(i2)}: ${r.key} is also preset in env.`);
      keys.add(r.key);
    }
    for (const [i2, o] of entry.optional_envs.entries()) {
      if (keys.has(o.key)) problems.push(`${where} field optional_envs.${String(i2)}: ${o.key} is also in env or required_envs.`);
    }
    if (new Set(entry.volumes).size !== entry.volumes.length) problems.push(`${where} field volumes: a path is listed twice.`);
  });
  return problems;
}

/** The tag of an image reference, or null when it has none (a digest counts as pinned). */
export function imageTag(image: string): string | null {
  if (image.includes('@sha256:')) return 'digest';
  const lastSlash = image.lastIndexOf('/');
  const colon = image.indexOf(':', lastSlash + 1);
  return colon === -1 ? null : image.slice(colon + 1);
}

/** Why the placeholders in a preset value are wrong, one sentence each. */
function placeholderProblems(value: string, databases: readonly string[]): string[] {
  const out: string[] = [];
  for (const m of value.matchAll(ANY_PLACEHOLDER)) {
    const text = m[0];
    const gen = /^\$\{(password|hex|base64):([0-9]{1,3})\}$/.exec(text);
    if (gen !== null) {
      const n = Number(gen[2]);
      if (n < 8 || n > 256) out.push(`${text}: a generated value is 8 to 256 long.`);
      continue;
    }
    if (text === '${uuid}' || text === '${url}' || text === '${domain}') continue;
    const db = /^\$\{\{\s*databases\.([a-z]+)\.([a-z_]+)\s*\}\}$/.exec(text);
    if (db !== null) {
      if (!databases.includes(db[1] ?? '')) out.push(`${text}: the template does not declare a ${db[1] ?? ''} database.`);
      else if (!DB_FIELDS.includes(db[2] ?? '')) out.push(`${text}: a database reference ends in one of ${DB_FIELDS.join(', ')}.`);
      continue;
    }
    out.push(`${text} is not a generator (\${password:N}, \${hex:N}, \${base64:N}, \${uuid}), \${url}, \${domain} or \${{databases.<type>.<field>}}.`);
  }
  return out;
}

/** Reads and checks one catalog file; throws CatalogError naming every problem. */
export function readCatalogFile(file: string): CatalogEntry[] {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new CatalogError(file, [`it cannot be read as JSON: ${err instanceof Error ? err.message : String(err)}`]);
  }
  const problems = catalogProblems(data);
  if (problems.length > 0) throw new CatalogError(file, problems);
  return data as CatalogEntry[];
}

/** The catalog that ships with Slipway. */
export const SHIPPED_CATALOG = new URL('../../../catalog/templates.json', import.meta.url).pathname;

/** The catalog in force: the shipped one, then the entries of `extra` (same key: replaced). */
export class Catalog {
  private readonly byKey = new Map<string, CatalogEntry>();

  constructor(entries: readonly CatalogEntry[]) {
    for (const e of entries) this.byKey.set(e.key, e);
  }

  static load(files: readonly string[]): Catalog {
    return new Catalog(files.flatMap((f) => readCatalogFile(f)));
  }

  entries(): CatalogEntry[] {
    return [...this.byKey.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  get(key: string): CatalogEntry | undefined {
    return this.byKey.get(key);
  }

  /** Up to 3 keys like `key` (edit distance, then shared prefix), for a 400 that helps. */
  near(key: string): string[] {
    const k = key.toLowerCase();
    return [...this.byKey.keys()]
      .map((candidate) => ({ candidate, d: distance(k, candidate) - (candidate.includes(k) || k.includes(candidate) ? 2 : 0) }))
      .filter((x) => x.d <= Math.max(2, Math.floor(x.candidate.length / 3)))
      .sort((a, b) => a.d - b.d || a.candidate.localeCompare(b.candidate))
      .slice(0, 3)
      .map((x) => x.candidate);
  }
}

export function publicView(e: CatalogEntry): CatalogView {
  return {
    name: e.name,
    key: e.key,
    description: e.description,
    source: e.source,
    default_port: e.default_port,
    default_cpu: e.default_cpu,
    default_ram: e.default_ram,
    required_envs: e.required_envs,
    image: e.image,
    category: e.category,
    website: e.website,
    version: e.version,
    databases: e.databases,
    optional_envs: e.optional_envs,
  };
}

/** Levenshtein distance. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j] ?? 0;
      row[j] = Math.min((row[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return row[b.length] ?? 0;
}
