// What the tests of the built launcher (test/e2e/cli-*.test.ts) share: the API called over HTTP,
// the keys a command prints, the store flags of a test database, and `slipway serve` over it
// (the shared fixture, served.ts). The tests are split by subject into files so that the run's
// workers take them side by side (docs/testing.md#workers).
import { statSync } from 'node:fs';
import type { SlipwayProcess } from './process.js';
import { startServed } from './served.js';
import type { TestDatabase } from './stores.js';

export const KEYS = /svc_sk_[0-9a-f]{40}/g;
export const ONLY_KEY = /^svc_sk_[0-9a-f]{40}\n$/;

export interface Envelope<T> {
  success: boolean;
  data?: T;
  error?: string;
}
export interface Workspace {
  slug: string;
  role?: string;
}

export async function api<T>(base: string, method: string, path: string, key?: string, body?: unknown): Promise<{ status: number; body: Envelope<T> }> {
  const headers: Record<string, string> = key === undefined ? {} : { 'x-api-key': key };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: res.status, body: (await res.json()) as Envelope<T> };
}

export const mode = (file: string): number => statSync(file).mode & 0o777;
export const keysIn = (text: string): string[] => text.match(KEYS) ?? [];
export const storeArgs = (db: TestDatabase): string[] => ['--data-dir', db.dir, ...(db.kind === 'postgres' ? ['--database-url', db.url] : [])];

/** `slipway serve` over the test's store, its API as `base`. */
export async function serve(db: TestDatabase): Promise<{ proc: SlipwayProcess; base: string }> {
  const { proc, api: base } = await startServed({ database: db });
  return { proc, base };
}
