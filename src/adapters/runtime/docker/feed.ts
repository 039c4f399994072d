import type { Feed } from '../../../domain/runtime.js';

/**
 * A Feed filled by push(): items wait in order until the consumer asks for them. end() finishes
 * the feed (with an error, the consumer's loop throws it); close() is the consumer saying stop,
 * and runs `onClose` once so that the source connection is released.
 */
export interface ChannelPressure {
  /** past this many waiting items the source is asked to pause; it resumes at half of it */
  highWater: number;
  /** true: pause the source; false: resume it */
  onPressure(full: boolean): void;
}

export class Channel<T> implements Feed<T> {
  private readonly items: T[] = [];
  private readonly waiting: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }[] = [];
  private finished = false;
  private failure: Error | null = null;
  private closed = false;
  private full = false;

  /** `pressure`: a source that can pause (a stream) is paused while the consumer is behind, so waiting items stay bounded */
  constructor(
    private readonly onClose: () => void = () => undefined,
    private readonly pressure?: ChannelPressure,
  ) {}

  get isFinished(): boolean {
    return this.finished;
  }

  push(item: T): void {
    if (this.finished) return;
    const waiter = this.waiting.shift();
    if (waiter !== undefined) {
      waiter.resolve({ value: item, done: false });
      return;
    }
    this.items.push(item);
    if (this.pressure !== undefined && !this.full && this.items.length >= this.pressure.highWater) {
      this.full = true;
      this.pressure.onPressure(true);
    }
  }

  private taken(): void {
    if (this.full && this.pressure !== undefined && this.items.length <= this.pressure.highWater / 2) {
      this.full = false;
      if (!this.finished) this.pressure.onPressure(false);
    }
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
        if (this.items.length > 0) {
          const value = this.items.shift() as T;
          this.taken();
          return Promise.resolve({ value, done: false });
        }
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
