// The two failures the `slipway` command reports as a sentence, without a stack trace: kept apart so
// that main.ts names them without loading the server or the store.

/** A start that failed for a reason the operator can fix (reported without a stack trace). */
export class StartError extends Error {}

/** An admin command refused for a reason the operator can fix (exit code 2). */
export class CliError extends Error {}
