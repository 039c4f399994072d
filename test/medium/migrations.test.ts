// Released migrations are frozen (docs/operations.md#upgrade): a store that applied one never
// applies it again, so editing its text would leave old and new installations with different
// schemas. Each migration file is held here by the SHA-256 of its bytes as committed.
//
// Adding a migration: add its file under src/store/migrations/, append it to ALL in index.ts, and
// add a row below with `sha256sum src/store/migrations/<name>.ts`. Never change an existing row:
// a change to a released migration is a new migration.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { migrationProvider } from '../../src/store/migrations/index.js';

const RELEASED: readonly (readonly [name: string, sha256: string])[] = [
  ['2026-11-21T000000-tenancy', 'f141bdfe6f60c83a13a4c2b63a702d20406ccc9c7bd96d694d2040525b671f51'],
  ['2026-11-21T010000-projects', '96577bb38369ac8e2e861e161762373c4d8ab43ef7176f3ed7d16b7d6d5e2978'],
  ['2026-11-22T000000-deploy-queue', 'f572fc1c0eac4e24568c0a95176657db9f4c6c485323edd1cf8debd283cc163c'],
  ['2026-11-23T000000-leases', '2c87fc0386199eb2f5547e2bbb0f852c875ce5351488f4b1f47048cde7e6909e'],
  ['2026-11-24T000000-restart-requests', '3d059b415d2d4b73f19ca5a9bf66f04dfbb4e352c58b885832bf212bbb1a9552'],
  ['2026-11-25T010000-github-installations', '34bb02b645a8d3e097aac4f20ab0b531edfb5fae184052da6237d0aa79525257'],
  ['2026-11-25T020000-webhook-secrets', '7dd373c55c41fe29d4767452021a77b68bec259ae6d0c5e0e250cbbf72dc3e29'],
  ['2026-11-25T030000-hosts', '64c972b005aa3d3a2bd90d9b79ead46071c6ed50cbaf872a4594e2fe201e3670'],
  ['2026-11-25T090000-workspace-creators', 'c7040388b2b6d0bbe8d9c1ba49262f5b2af1175705c04d3c25cad285afb88457'],
  ['2026-11-26T000000-runtime-logs', 'aeb6a0e9675db3ecf5bacd8b73bc921104fcd5d91e048c034d867a04704a7bf0'],
  ['2026-11-27T000000-databases', '8c7459336ef54b70c4726db45ae708ea1ec87af540264ec6c24e275f89adf0cc'],
  ['2026-11-28T000000-templates', 'ff25f149042561efc908a61faf03d4ca9be3a51b4c4f1d734fd867cfda0323dc'],
  ['2026-11-29T000000-billing', '2a386414880c97e2880f0300ffd02e6a2c8c16a72204ecc3d9e8bcfcb1158cb8'],
  ['2026-11-30T000000-uptime', '8e3ca527b0114b03305ebae93891d790b9d6b088ec45398fc4f17c69564c9462'],
  ['2026-12-01T000000-consent', '2eb35ad02fd2e1a5aca4a784a6ff0e5671d015fc250d951c92ed5d176b1758e5'],
  ['2026-12-07T000000-backups', 'febc2c31177c4d8b1aef557cc847fc75e0332fbce495a50cd6f261a66c7d8ebd'],
  ['2026-12-07T120000-restores', '18afc043e19a293940e1287e8e791bf01a19f77c1fa569a54d064831993f5a45'],
];

const DIR = new URL('../../src/store/migrations/', import.meta.url);
const NAME = /^\d{4}-\d{2}-\d{2}T\d{6}-[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** The migration files on disk, by name without `.ts`, in name order. */
function files(): string[] {
  return readdirSync(DIR)
    .filter((f) => f.endsWith('.ts') && f !== 'index.ts' && !f.endsWith('.test.ts'))
    .map((f) => f.slice(0, -'.ts'.length))
    .sort();
}

/** SHA-256 of the raw bytes: no decoding, no line-ending normalisation. */
function sha256(name: string): string {
  return createHash('sha256')
    .update(readFileSync(new URL(`${name}.ts`, DIR)))
    .digest('hex');
}

describe('released migrations', () => {
  const released = RELEASED.map(([name]) => name);

  it('are listed in name order, once each', () => {
    expect(released).toEqual([...new Set(released)].sort());
    for (const name of released) expect(name).toMatch(NAME);
  });

  it.each(RELEASED)('%s is unchanged', (name, hash) => {
    expect(sha256(name), `${name}.ts was edited; a released migration is frozen: write a new one`).toBe(hash);
  });

  it('every migration file is released here: a new one adds its checksum to RELEASED', () => {
    const unlisted = files().filter((f) => !released.includes(f));
    expect(unlisted, 'migration files without a row in RELEASED (test/medium/migrations.test.ts)').toEqual([]);
    const missing = released.filter((name) => !files().includes(name));
    expect(missing, 'released migrations whose file is gone').toEqual([]);
  });

  it('index.ts registers every file, in order, each under its own name', async () => {
    const registered = Object.keys(await migrationProvider('sqlite').getMigrations());
    expect(registered).toEqual(files());

    // The provider hides which module each name maps to: read that from index.ts itself.
    const index = readFileSync(new URL('index.ts', DIR), 'utf8');
    const modules = new Map<string, string>();
    for (const m of index.matchAll(/^import \* as (\w+) from '\.\/([^']+)\.js';$/gm)) modules.set(m[1] ?? '', m[2] ?? '');
    const entries = [...index.matchAll(/^ {2}'([^']+)': (\w+),$/gm)].map((m) => [m[1], modules.get(m[2] ?? '')]);
    expect(entries).toEqual(files().map((f) => [f, f]));
  });
});
