/**
 * An object of the leader's (the deploy engine, the database worker, the billing worker) that an
 * API-side service reaches though it is made later, and only in the process that leads: the
 * composition root sets it when the leader starts (the engine also while standing by) and clears
 * it when the leader stops. Meanwhile `get()` is the idle stand-in, which wakes nothing: the work
 * stays queued in the store for whichever process leads (`--engine none`, a standby, a test of
 * the API alone).
 */
export class Late<T> {
  private current: T;

  constructor(private readonly idle: T) {
    this.current = idle;
  }

  /** From now on, `get()` is `value`. */
  set(value: T): void {
    this.current = value;
  }

  /** Back to the idle stand-in. */
  clear(): void {
    this.current = this.idle;
  }

  /** The leader's object of the moment, or the idle stand-in. */
  get(): T {
    return this.current;
  }
}
