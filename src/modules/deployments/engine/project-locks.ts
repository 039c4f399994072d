/**
 * One lock per project: a rollout's switch, a stop, a restart and a reconcile pass on the same
 * project never interleave, while different projects go on in parallel. A failed holder does
 * not break the lock for the next one.
 */
export class ProjectLocks {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(projectId: string, fn: () => Promise<T>): Promise<T> {
    const run = (this.tails.get(projectId) ?? Promise.resolve()).then(fn, fn);
    const tail = run.catch(() => undefined);
    this.tails.set(projectId, tail);
    void tail.then(() => {
      if (this.tails.get(projectId) === tail) this.tails.delete(projectId);
    });
    return run;
  }
}
