/**
 * Runs `pass` now and every `everyMs` (a timer that does not keep the process alive), reporting a
 * failed pass to `onError`. A pass is expected to skip when the previous one is still running
 * (share its promise); the returned function stops the timer and waits for a pass in progress.
 */
export function everyInterval(pass: () => Promise<void>, everyMs: number, onError: (err: unknown) => void): () => Promise<void> {
  let current: Promise<void> | null = null;
  const run = () => {
    current = pass();
    current.catch(onError);
  };
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await current?.catch(() => undefined);
  };
}
