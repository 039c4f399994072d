/** A failure whose sentence is meant for the user (the deployment's `error`). */
export class DeployFailure extends Error {}

/** The error of a deployment that shutdown interrupted (Orchestrator.shutdown), or that a stopped process left in progress (Reconciler.failInterrupted). */
export const INTERRUPTED = 'Interrupted: Slipway stopped while this deployment was in progress.';
