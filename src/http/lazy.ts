/**
 * Compile on first use. The API's request validators (Ajv) and response serializers
 * (fast-json-stringify) are compiled the first time a route uses them, not at every start (a start
 * would compile ~250 of them, most of which an installation seldom or never calls). What has been
 * handed out and not compiled yet is kept here, so that the tests can compile everything at once
 * (compileEveryPending) and a broken schema fails a test, not a tenant's first request.
 */

/** The compilations handed out and not yet run. */
const pending = new Set<() => unknown>();

/** `compile`, run once on the first call of the returned function, which then gives its result. */
export function onFirstUse<T>(compile: () => T): () => T {
  let done: { value: T } | undefined;
  const once = (): T => {
    if (done === undefined) {
      done = { value: compile() };
      pending.delete(once);
    }
    return done.value;
  };
  pending.add(once);
  return once;
}

/** Compiles everything handed out so far and not yet used; how many it compiled. Throws what a compiler throws for a broken schema. */
export function compileEveryPending(): number {
  const now = [...pending];
  for (const once of now) once();
  return now.length;
}
