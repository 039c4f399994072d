import { fileURLToPath } from 'node:url';
import { lintFromString, loadConfig } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../factories/harness.js';
import { operations, type OpenApiDocument } from '../factories/openapi.js';
import { compileEveryPending } from '../../src/http/lazy.js';

/** The repository's root, where redocly.yaml and its ignore file live. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Operation {
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, unknown>;
  security?: unknown[];
}
interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  propertyNames?: Schema;
  items?: Schema;
}
interface Doc {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown> };
}

const openApiPath = (url: string) => url.replace(/:([A-Za-z_]+)/g, '{$1}');

/** Every object schema a client may send must reject unknown fields. */
function closedObjects(schema: Schema, at: string, out: string[]): void {
  // A map whose names are constrained (propertyNames) is closed too: env/bulk's variables.
  const closed = schema.additionalProperties === false || schema.propertyNames !== undefined;
  if (schema.type === 'object' && !closed) out.push(at);
  if (typeof schema.additionalProperties === 'object') closedObjects(schema.additionalProperties, `${at}.*`, out);
  for (const [k, v] of Object.entries(schema.properties ?? {})) closedObjects(v, `${at}.${k}`, out);
  if (schema.items !== undefined) closedObjects(schema.items, `${at}[]`, out);
}

describe('the OpenAPI document', () => {
  let s: TestServer;
  let doc: Doc;
  let text: string;
  beforeAll(async () => {
    s = await startTestServer('sqlite');
    const r = await fetch(`${s.url}/api/openapi.json`);
    text = await r.text();
    doc = JSON.parse(text) as Doc;
  });
  afterAll(async () => s.close());

  it('compiles every route\'s validators and response serializers, which a start leaves until first use', () => {
    // a broken schema throws here instead of failing its route's first request
    expect(() => compileEveryPending()).not.toThrow();
    expect(compileEveryPending()).toBe(0);
  });

  it('is OpenAPI 3.1 with the X-API-Key scheme', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.components.securitySchemes['apiKey']).toEqual({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
  });

  it('documents every registered route', () => {
    const missing = s.app.routeTable
      .filter((r) => r.method !== 'HEAD')
      .filter((r) => doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()] === undefined)
      .map((r) => `${r.method} ${r.url}`);
    expect(missing).toEqual([]);
  });

  it('documents responses for every operation, and closed request bodies', () => {
    const open: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        expect(Object.keys(op.responses).length, `${method} ${path}`).toBeGreaterThan(0);
        const body = op.requestBody?.content['application/json']?.schema;
        if (body !== undefined) closedObjects(body, `${method.toUpperCase()} ${path}`, open);
      }
    }
    expect(open).toEqual([]);
  });

  it('names every operation with a unique camelCase operationId (the CLI and the dashboard are generated against them)', () => {
    const ids = operations(doc as unknown as OpenApiDocument).map(({ method, path, op }) => op.operationId ?? `(none) ${method} ${path}`);
    expect(ids.filter((id) => !/^[a-z][A-Za-z0-9]*$/.test(id))).toEqual([]);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
  });

  it('declares its server: the origin it was read from', () => {
    expect((doc as unknown as OpenApiDocument).servers).toEqual([{ url: '/', description: 'The origin that served this document.' }]);
  });

  it('documents 413 and 415 on every operation that takes a body', () => {
    const missing = operations(doc as unknown as OpenApiDocument)
      .filter(({ op }) => op.requestBody !== undefined)
      .filter(({ op }) => op.responses['413'] === undefined || op.responses['415'] === undefined)
      .map(({ method, path }) => `${method} ${path}`);
    expect(missing).toEqual([]);
  });

  it("passes Redocly's lint with the repository's redocly.yaml, warnings included", async () => {
    const config = await loadConfig({ configPath: `${ROOT}redocly.yaml` });
    const problems = await lintFromString({ source: text, absoluteRef: `${ROOT}openapi.json`, config });
    const shown = problems.filter((p) => p.ignored !== true).map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer ?? ''}: ${p.message}`);
    expect(shown).toEqual([]);
  });
});
