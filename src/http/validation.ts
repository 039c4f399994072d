import { Ajv, type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { isEmailAddress } from '../domain/email.js';
import { onFirstUse } from './lazy.js';

/**
 * Two Ajv instances: bodies are validated as sent (no coercion, unknown fields rejected, not
 * silently removed: Fastify's default `removeAdditional` would drop them), while path and
 * query strings are coerced, since they only ever arrive as text.
 */
function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    coerceTypes: coerce,
    useDefaults: true,
    removeAdditional: false,
    verbose: true,
    strict: true,
    strictTypes: false,
  });
  // OpenAPI-style extension keywords carried by our schemas.
  ajv.addVocabulary(['x-error', 'example']);
  addFormats.default(ajv, ['date-time', 'uri']);
  ajv.addFormat('email', { type: 'string', validate: isEmailAddress });
  return ajv;
}

/** How an integer may be spelled in a query string or a path: decimal digits, at most 15 (exact in a double). */
const DECIMAL = /^-?[0-9]{1,15}$/;

interface Validator {
  (data: unknown): boolean;
  errors?: ErrorObject[] | null;
}

/**
 * The integer properties of a query string or path schema. Ajv's coercion would take `1e3`,
 * `0x10`, ` 7`, `1.0` or `99999999999999999999` (a float past every bound the store holds) as
 * numbers, so their spelling is checked on the raw text first; and each must be bounded.
 */
function integerFields(schema: unknown, part: string): Map<string, Record<string, unknown>> {
  const fields = new Map<string, Record<string, unknown>>();
  const properties = (schema as { properties?: Record<string, Record<string, unknown>> } | undefined)?.properties ?? {};
  for (const [name, field] of Object.entries(properties)) {
    if (field['type'] !== 'integer' && field['type'] !== 'number') continue;
    if (typeof field['minimum'] !== 'number' || typeof field['maximum'] !== 'number') {
      throw new Error(`The ${PART_NAMES[part] ?? part} integer "${name}" needs a minimum and a maximum: use QueryInteger.`);
    }
    fields.set(name, field);
  }
  return fields;
}

function checkedSpelling(validate: Validator, fields: Map<string, Record<string, unknown>>): Validator {
  const wrapped: Validator = (data: unknown) => {
    const values = (data ?? {}) as Record<string, unknown>;
    for (const [name, field] of fields) {
      const value = values[name];
      if (value === undefined || (typeof value === 'string' && DECIMAL.test(value))) continue;
      wrapped.errors = [
        {
          instancePath: `/${name}`,
          schemaPath: `#/properties/${name}/format`,
          keyword: 'format',
          params: { format: 'whole number written in decimal digits' },
          message: 'must be a whole number written in decimal digits',
          parentSchema: field,
        },
      ];
      return false;
    }
    const ok = validate(data);
    wrapped.errors = validate.errors ?? null;
    return ok;
  };
  return wrapped;
}

/**
 * The validators, compiled once per schema in the process: the schemas are the modules' constants,
 * so an app built again in the same process (a standby's, every test server) reuses them instead
 * of compiling each route again (about a second of CPU per app).
 */
let compilers: { strict: Ajv; coercing: Ajv; byPart: WeakMap<object, Validator> } | undefined;

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  compilers ??= { strict: makeAjv(false), coercing: makeAjv(true), byPart: new WeakMap() };
  const { strict, coercing, byPart } = compilers;
  // by schema object: each schema object is only ever one part of a route (a body, a query, params)
  return ({ schema, httpPart }) => {
    const known = byPart.get(schema as object);
    if (known !== undefined) return known;
    let made: Validator;
    if (httpPart === 'body') {
      made = lazily(() => strict.compile(schema as object));
    } else {
      const fields = integerFields(schema, httpPart ?? 'querystring');
      const validate = lazily(() => coercing.compile(schema as object));
      made = fields.size === 0 ? validate : checkedSpelling(validate, fields);
    }
    byPart.set(schema as object, made);
    return made;
  };
}

/**
 * A validator compiled on its first use (src/http/lazy.ts): a start compiles no route's schemas
 * (about 0.3 s of CPU and the code of ~150 validators).
 */
function lazily(compile: () => Validator): Validator {
  const compiled = onFirstUse(compile);
  const validate: Validator = (data: unknown) => {
    const v = compiled();
    const ok = v(data);
    validate.errors = v.errors ?? null;
    return ok;
  };
  return validate;
}

const PART_NAMES: Record<string, string> = { body: 'request body', querystring: 'query string', params: 'path' };

/** Turn the first Ajv error into one sentence that names the field. */
export function describeValidationError(errors: ErrorObject[], part: string): string {
  const e = errors[0];
  if (e === undefined) return `The ${PART_NAMES[part] ?? part} is invalid.`;
  const path = e.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
  const field = (name: string) => `"${name}"`;
  const custom = (e.parentSchema as Record<string, unknown> | undefined)?.['x-error'];
  if (path === '' && e.keyword === 'type') {
    return part === 'body' ? 'The request body must be a JSON object.' : `The ${PART_NAMES[part] ?? part} is invalid.`;
  }
  const subject = path === '' ? `The ${PART_NAMES[part] ?? part}` : field(path);
  const child = (name: string) => field(path === '' ? name : `${path}.${name}`);
  if (e.keyword === 'propertyNames' || e.propertyName !== undefined) {
    // A bad key of a map (env/bulk's variables): name the key, then the rule.
    const rule = typeof custom === 'string' ? custom : 'must use allowed names only';
    return `${subject} ${rule} (${JSON.stringify(e.propertyName ?? '')} is not).`;
  }
  if (typeof custom === 'string' && !['required', 'additionalProperties', 'type'].includes(e.keyword)) {
    return `${subject} ${custom}.`;
  }
  const p = e.params as Record<string, string | number | undefined>;
  const limit = String(p['limit']);
  switch (e.keyword) {
    case 'required':
      return `${child(String(p['missingProperty']))} is required.`;
    case 'additionalProperties':
      return `Unknown field ${child(String(p['additionalProperty']))}${part === 'querystring' ? ' in the query string' : ''}.`;
    case 'type': {
      const t = String(p['type']);
      const article = /^[aeiou]/.test(t) ? 'an' : 'a';
      return t === 'object' ? `${subject} must be a JSON object.` : `${subject} must be ${article} ${t}.`;
    }
    case 'minLength':
      return Number(p['limit']) === 1 ? `${subject} must not be empty.` : `${subject} must be at least ${limit} characters long.`;
    case 'maxLength':
      return `${subject} must be at most ${limit} characters long.`;
    case 'minimum':
      return `${subject} must be at least ${limit}.`;
    case 'maximum':
      return `${subject} must be at most ${limit}.`;
    case 'enum':
      return `${subject} must be one of ${((e.params as { allowedValues: unknown[] }).allowedValues).map(String).join(', ')}.`;
    case 'const':
      return `${subject} must be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}.`;
    case 'format':
      return `${subject} must be a valid ${String(p['format'])}.`;
    case 'pattern':
      return `${subject} has an invalid format.`;
    case 'minProperties':
      return `${subject} must name at least ${limit} field${Number(p['limit']) === 1 ? '' : 's'}.`;
    case 'maxProperties':
      return `${subject} must have at most ${limit} fields.`;
    default:
      return `${subject} ${e.message ?? 'is invalid'}.`;
  }
}
