// The OpenAPI document as a third party reads it: a strict JSON Schema 2020-12 validator (Ajv in
// strict mode, the dialect of OpenAPI 3.1) compiled from the document's own response schemas, and
// applied to real responses. A response whose status, content type or body the document does not
// describe is a problem, as it would be for a client generated from the document.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export interface JsonSchema {
  [keyword: string]: unknown;
}

export interface MediaType {
  schema?: JsonSchema;
}

export interface ResponseObject {
  description: string;
  content?: Record<string, MediaType>;
}

export interface OperationObject {
  operationId?: string;
  requestBody?: { content: Record<string, MediaType> };
  responses: Record<string, ResponseObject>;
  security?: unknown[];
}

export interface OpenApiDocument {
  openapi: string;
  servers?: { url: string }[];
  paths: Record<string, Record<string, OperationObject>>;
  components?: { schemas?: Record<string, JsonSchema>; securitySchemes?: Record<string, unknown> };
}

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'] as const;

/** Every operation of the document, with its method and path template. */
export function operations(doc: OpenApiDocument): { method: string; path: string; op: OperationObject }[] {
  const out: { method: string; path: string; op: OperationObject }[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if ((HTTP_METHODS as readonly string[]).includes(method)) out.push({ method, path, op });
    }
  }
  return out;
}

/** `type/subtype` of a Content-Type, lower case, without parameters. */
const essence = (contentType: string): string => (contentType.split(';')[0] ?? '').trim().toLowerCase();

/** `#/components/schemas/X` → `#/$defs/X`, so that each compiled schema carries the components it refers to. */
function localRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(localRefs);
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    out[k] = k === '$ref' && typeof v === 'string' ? v.replace(/^#\/components\/schemas\//, '#/$defs/') : localRefs(v);
  }
  return out;
}

export class ResponseValidator {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly templates: { method: string; path: string; pattern: RegExp; params: number; op: OperationObject }[];

  constructor(private readonly doc: OpenApiDocument) {
    // strict: unknown keywords, ignored keywords and ambiguous types are errors, not silently passed
    this.ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats.default(this.ajv);
    // the annotations OpenAPI 3.1's schema dialect adds to JSON Schema 2020-12 (its base vocabulary)
    this.ajv.addVocabulary(['example', 'xml', 'externalDocs']);
    this.templates = operations(doc).map(({ method, path, op }) => ({
      method,
      path,
      op,
      params: (path.match(/\{[^}]+\}/g) ?? []).length,
      pattern: new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}$`),
    }));
  }

  /** The operation a request reached: the matching path template with the fewest parameters (a literal segment wins, as in the router). */
  operation(method: string, url: string): { path: string; op: OperationObject } | undefined {
    const path = new URL(url, 'http://x').pathname.replace(/\/+$/, '') || '/';
    return this.templates
      .filter((t) => t.method === method.toLowerCase() && t.pattern.test(path))
      .sort((a, b) => a.params - b.params)[0];
  }

  private schemaFor(key: string, schema: JsonSchema): ValidateFunction {
    let validate = this.compiled.get(key);
    if (validate === undefined) {
      validate = this.ajv.compile({ ...(localRefs(schema) as JsonSchema), $defs: localRefs(this.doc.components?.schemas ?? {}) as JsonSchema });
      this.compiled.set(key, validate);
    }
    return validate;
  }

  /** What the document fails to describe about one response: empty when it describes it fully. */
  check(method: string, url: string, status: number, contentType: string | null, body: string): string[] {
    const at = `${method.toUpperCase()} ${url} → ${status}`;
    const found = this.operation(method, url);
    if (found === undefined) return [`${at}: no operation in the document`];
    const response = found.op.responses[String(status)] ?? found.op.responses[`${String(status).charAt(0)}XX`];
    if (response === undefined) return [`${at}: status ${status} is not documented (${Object.keys(found.op.responses).join(', ')})`];
    if (response.content === undefined) return body === '' ? [] : [`${at}: a body (${contentType ?? 'no content type'}) where the document describes none`];
    const type = contentType === null ? '' : essence(contentType);
    const entry = Object.entries(response.content).find(([t]) => essence(t) === type);
    if (entry === undefined) return [`${at}: content type ${contentType ?? '(none)'} is not documented (${Object.keys(response.content).join(', ')})`];
    const [documented, media] = entry;
    if (media.schema === undefined || !type.endsWith('json')) return [];
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch {
      return [`${at}: ${documented} body is not JSON`];
    }
    const validate = this.schemaFor(`${found.path} ${method} ${status} ${documented}`, media.schema);
    if (validate(value)) return [];
    return (validate.errors ?? []).map((e) => `${at}: ${e.instancePath || '/'} ${e.message ?? ''} (${e.schemaPath})`);
  }
}
