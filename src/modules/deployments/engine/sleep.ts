/**
 * Waits `ms`, or less when `signal` aborts (it never rejects). The abort listener lives only as
 * long as the wait: a long-lived signal (an engine's shutdown) that many waits share does not
 * collect one listener per wait.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted === true) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
