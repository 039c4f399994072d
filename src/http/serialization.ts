import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { onFirstUse } from './lazy.js';

type SerializerFactory = ReturnType<typeof SerializerSelector>;
type Serializer = ReturnType<ReturnType<SerializerFactory>>;

const build = SerializerSelector();
/** By the shared schemas' ids (the `$ref` targets: ErrorEnvelope), then by response schema object. */
const compiled = new Map<string, WeakMap<object, Serializer>>();

/**
 * Fastify's response serializers (fast-json-stringify), compiled once per schema in the process:
 * the response schemas are the modules' constants, so an app built again in the same process (a
 * standby's, every test server) reuses them instead of compiling each route again. Set as the
 * app's `schemaController.compilersFactory.buildSerializer`. Each is compiled on its first
 * response (the tests compile them all, compileEveryPending(), so none fails first in use).
 */
export const cachedSerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = build(externalSchemas, options);
  const shared = Object.keys(externalSchemas ?? {}).sort().join(' ');
  const cache = compiled.get(shared) ?? new WeakMap<object, Serializer>();
  compiled.set(shared, cache);
  return (route) => {
    const schema = route.schema;
    if (typeof schema !== 'object' || schema === null) return compile(route);
    const known = cache.get(schema);
    if (known !== undefined) return known;
    // compiled on its first response (src/http/lazy.ts): a start compiles none (most routes answer seldom or never)
    const serializer = onFirstUse(() => compile(route));
    const made: Serializer = (data) => serializer()(data);
    cache.set(schema, made);
    return made;
  };
};
