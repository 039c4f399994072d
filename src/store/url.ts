// What a store URL names, without loading a store driver (the CLI's settings read it at every start).

/** `postgres://…` or `postgresql://…` selects PostgreSQL; anything else is SQLite. */
export const isPostgresUrl = (url: string): boolean => /^postgres(ql)?:\/\//.test(url);
