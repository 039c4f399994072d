import { Ajv, type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

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
  addFormats.default(ajv, ['email', 'date-time', 'uri']);
  return ajv;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const strictAjv = makeAjv(false);
  const coercingAjv = makeAjv(true);
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strictAjv : coercingAjv;
    return ajv.compile(schema as object);
  };
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
