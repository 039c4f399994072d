import { Type, type Static, type TSchema, type TUnsafe } from 'typebox';
import { ROLES, type Role } from '../domain/roles.js';
import { SLUG_PATTERN } from '../domain/slug.js';

/**
 * Building blocks shared by every route schema. A route's schema is the single source of its
 * validation, its TypeScript types (through the type provider) and its OpenAPI entry.
 */

/** `{ success: true, data }`: the success envelope around a payload schema. */
export const Envelope = <T extends TSchema>(data: T) =>
  Type.Object({ success: Type.Literal(true), data }, { additionalProperties: false });

/** `{ success: false, error }`, registered once with `app.addSchema` (the OpenAPI document's one `ErrorEnvelope` component). */
export const ErrorEnvelopeSchema = Type.Object(
  { success: Type.Literal(false), error: Type.String({ description: 'One human sentence.' }) },
  { additionalProperties: false, $id: 'ErrorEnvelope' },
);

/** Every failure's body: a reference to the registered schema, so that clients generated from the document share one error type. */
export const ErrorEnvelope = Type.Unsafe<Static<typeof ErrorEnvelopeSchema>>(Type.Ref('ErrorEnvelope'));

/** A string enum as `{type: string, enum}`: one clear validation error instead of an anyOf of consts. */
export const StringEnum = <const T extends readonly string[]>(values: T, options: Record<string, unknown> = {}): TUnsafe<T[number]> =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });

export const RoleSchema: TUnsafe<Role> = StringEnum(ROLES, { description: 'owner > admin > member' });

/** The schema, or null. */
export const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339 UTC with milliseconds.' });

export const Slug = Type.String({
  pattern: SLUG_PATTERN,
  maxLength: 63,
  'x-error': 'must be a DNS label: lowercase letters, digits and inner hyphens, at most 63 characters',
});

export const Name = Type.String({ minLength: 1, maxLength: 100 });

export const Email = Type.String({ format: 'email', maxLength: 254, 'x-error': 'must be a valid e-mail address' });

/**
 * An integer in a query string: plain decimal digits only (no `1e3`, `0x10`, `+5`, `1.0`, spaces;
 * the validator refuses other spellings before Ajv would coerce them), and always bounded, so that
 * no value reaches the store as a float or overflows a column. Every query integer uses this.
 */
export const QueryInteger = (opts: { minimum: number; maximum: number; default?: number; description?: string }) =>
  Type.Integer({
    ...opts,
    'x-error': `must be a whole number from ${opts.minimum} to ${opts.maximum}, written in decimal digits`,
  });

/** 50 per page: ten million rows, and an offset the store holds exactly. */
export const MAX_PAGE = 200_000;

/** `?page=&limit=` of every paged list (deployments, the ledger, payments, notifications): limit 1 to 50, default 20. */
export const PageQuery = Type.Object(
  {
    page: QueryInteger({ minimum: 1, maximum: MAX_PAGE, default: 1 }),
    limit: QueryInteger({ minimum: 1, maximum: 50, default: 20 }),
  },
  { additionalProperties: false },
);

export const SlugParams = Type.Object({ slug: Type.String() });

export const ProjectParams = Type.Object({ slug: Type.String(), project_slug: Type.String() });

/** The statuses every authenticated route can answer with besides its success. */
export const authErrors = {
  400: ErrorEnvelope,
  401: ErrorEnvelope,
  403: ErrorEnvelope,
  404: ErrorEnvelope,
  429: ErrorEnvelope,
};

/**
 * The statuses of every operation that takes a request body, before its schema is checked: a body
 * over the 1 MiB limit (413) or not in JSON (415).
 */
export const bodyErrors = {
  413: ErrorEnvelope,
  415: ErrorEnvelope,
};

/** The success of a WebSocket route: the handshake's answer, with no body (frames follow). */
export const WEBSOCKET_OPENS = { description: 'Switching Protocols: the WebSocket stream opens; text frames follow.' };

export const ok = <T>(data: T): { success: true; data: T } => ({ success: true, data });
