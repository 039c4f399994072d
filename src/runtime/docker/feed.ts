import type { Feed } from '../../domain/runtime.js';

/**
 * A Feed filled by push(): items wait in order until the consumer asks for them. end() finishes
 * the feed (with an error, the consumer's loop throws it); close() is the consumer saying stop,
 * and runs `onClose` once so that the source connection is released.
 */
export class Channel<T> implements Feed<T> {
  private readonly items: T[] = [];
  private readonly waiting: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }[] = [];
  private finished = false;
  private failure: Error | null = null;
  private closed = false;

  constructor(private readonly onClose: () => void = () => undefined) {}

  get isFinished(): boolean {
    return this.finished;
  }

  push(item: T): void {
    if (this.finished) return;
    const waiter = this.waiting.shift();
    if (waiter === undefined) this.items.push(item);
    else waiter.resolve({ value: item, done: false });
  }

  end(error?: unknown): void {
    if (this.finished) return;
    this.finished = true;
    if (error !== undefined && error !== null) this.failure = error instanceof Error ? error : new Error(JSON.stringify(error));
    // Waiters exist only while no item is queued: the first one gets the failure, once.
    for (const waiter of this.waiting.splice(0)) {
      const failure = this.failure;
      this.failure = null;
      if (failure === null) waiter.resolve({ value: undefined, done: true });
      else waiter.reject(failure);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.items.length = 0;
    this.end();
    this.onClose();
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.items.length > 0) return Promise.resolve({ value: this.items.shift() as T, done: false });
        if (this.finished) {
          const failure = this.failure;
          this.failure = null;
          return failure === null ? Promise.resolve({ value: undefined, done: true }) : Promise.reject(failure);
        }
        return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
      },
      return: () => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

/** Cuts a byte stream into lines ("\n" or "\r\n"), keeping an unfinished line until more arrives. */
export class LineSplitter {
  private rest = '';
  private readonly decoder = new TextDecoder('utf-8');

  constructor(private readonly onLine: (line: string) => void) {}

  write(chunk: Buffer | string): void {
    this.rest += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    let at: number;
    while ((at = this.rest.indexOf('\n')) >= 0) {
      const line = this.rest.slice(0, at);
      this.rest = this.rest.slice(at + 1);
      this.onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
    }
  }

  /** Emits what is left as a last line (a stream that did not end with a line break). */
  flush(): void {
    this.rest += this.decoder.decode();
    if (this.rest !== '') this.onLine(this.rest);
    this.rest = '';
  }
}
