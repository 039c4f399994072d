import type { CollectionCursor, DroppedLines, LogBatch, LogLine, LogStore } from '../../domain/logs.js';

export interface LogWriterOptions {
  /** where the batches are stored */
  logs: Pick<LogStore, 'append'>;
  /** a batch goes out at least this often while lines wait (default 50 ms) */
  flushEveryMs?: number;
  /** a batch holds about this many lines (default 5000); a full one goes out at once */
  maxBatchLines?: number;
  /** lines held, the batch in flight included; past it lines are dropped and counted (default 100,000) */
  maxBufferedLines?: number;
  /** after each stored batch, with the projects it touched (a live tail on this replica wakes up) */
  onStored?: (projectIds: ReadonlySet<string>) => void;
  /** a batch failed; it is kept and retried with the next one */
  onError?: (err: unknown) => void;
}

interface Chunk {
  lines: readonly LogLine[];
  cursor: CollectionCursor | undefined;
}

/**
 * Batches the collector's lines into few large store transactions. `write` never waits for the
 * store: it keeps what fits in a bounded buffer and drops (and counts, per project) what does
 * not, so a slow store or a long query costs lines, never memory or a stuck collector. One batch
 * is in flight at a time; a container's cursor travels in the same batch as its last lines.
 */
export class LogWriter {
  private readonly logs: Pick<LogStore, 'append'>;
  private readonly flushEveryMs: number;
  private readonly maxBatchLines: number;
  private readonly maxBufferedLines: number;
  private pending: Chunk[] = [];
  private pendingLines = 0;
  private inFlightLines = 0;
  private dropped = new Map<string, DroppedLines>();
  private droppedTotal = 0;
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  private readonly onStored: ((projectIds: ReadonlySet<string>) => void) | undefined;
  private readonly onError: ((err: unknown) => void) | undefined;

  constructor(o: LogWriterOptions) {
    this.logs = o.logs;
    this.flushEveryMs = o.flushEveryMs ?? 50;
    this.maxBatchLines = o.maxBatchLines ?? 5000;
    this.maxBufferedLines = o.maxBufferedLines ?? 100_000;
    this.onStored = o.onStored;
    this.onError = o.onError;
  }

  /** Lines held and not yet stored. */
  get buffered(): number {
    return this.pendingLines + this.inFlightLines;
  }

  /** Lines dropped since the writer started. */
  get droppedLines(): number {
    return this.droppedTotal;
  }

  /**
   * Takes the lines of one container, oldest first, and where its collection stands after them.
   * Returns how many lines were kept; the rest are dropped and counted, and the cursor still
   * moves past them (a restart must not collect them again). `dropped`: lines the caller itself
   * dropped (over a rate), counted with the next batch.
   */
  write(lines: readonly LogLine[], cursor?: CollectionCursor, dropped?: DroppedLines): number {
    if (this.closed) throw new Error('The log writer is closed.');
    if (dropped !== undefined && dropped.lines > 0) {
      const d = this.dropped.get(dropped.projectId);
      if (d === undefined) this.dropped.set(dropped.projectId, { ...dropped });
      else d.lines += dropped.lines;
    }
    const room = Math.max(0, this.maxBufferedLines - this.buffered);
    const kept = lines.length <= room ? lines : lines.slice(0, room);
    for (const line of lines.slice(kept.length)) {
      const d = this.dropped.get(line.projectId);
      if (d === undefined) this.dropped.set(line.projectId, { projectId: line.projectId, workspaceId: line.workspaceId, lines: 1 });
      else d.lines++;
      this.droppedTotal++;
    }
    if (kept.length > 0 || cursor !== undefined) {
      this.pending.push({ lines: kept, cursor });
      this.pendingLines += kept.length;
    }
    if (this.pendingLines >= this.maxBatchLines) this.kick();
    else this.schedule();
    return kept.length;
  }

  /** Stores everything held now; rejects if a batch fails (it stays held). */
  async flush(): Promise<void> {
    for (;;) {
      if (this.running !== null) {
        await this.running;
        continue;
      }
      if (this.pending.length === 0 && this.dropped.size === 0) return;
      await this.run(true);
    }
  }

  /** Stores what is held and takes no more lines. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
  }

  private schedule(): void {
    if (this.timer !== null || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.kick();
    }, this.flushEveryMs);
    this.timer.unref();
  }

  private kick(): void {
    if (this.running !== null) return;
    if (this.pending.length === 0 && this.dropped.size === 0) return;
    void this.run(false);
  }

  /** One batch. `rethrow`: flush() wants the failure; a background run reports it and retries later. */
  private run(rethrow: boolean): Promise<void> {
    const chunks: Chunk[] = [];
    let count = 0;
    while (this.pending.length > 0 && (count === 0 || count + (this.pending[0]?.lines.length ?? 0) <= this.maxBatchLines)) {
      const chunk = this.pending.shift();
      if (chunk === undefined) break;
      chunks.push(chunk);
      count += chunk.lines.length;
    }
    const dropped = this.dropped;
    this.dropped = new Map();
    this.pendingLines -= count;
    this.inFlightLines = count;
    const lines = chunks.flatMap((c) => c.lines);
    const cursors = chunks.flatMap((c) => (c.cursor === undefined ? [] : [c.cursor]));
    const batch: LogBatch = { lines, cursors, dropped: [...dropped.values()] };
    let failed = false;
    const run = this.logs.append(batch).then(
      () => {
        this.onStored?.(new Set(lines.map((l) => l.projectId)));
      },
      (err: unknown) => {
        failed = true;
        // keep everything for the next batch, in order
        this.pending.unshift(...chunks);
        this.pendingLines += count;
        for (const d of dropped.values()) {
          const now = this.dropped.get(d.projectId);
          if (now === undefined) this.dropped.set(d.projectId, d);
          else now.lines += d.lines;
        }
        if (rethrow) throw err;
        this.onError?.(err);
      },
    );
    const done = run.finally(() => {
      this.inFlightLines = 0;
      this.running = null;
      // after a failure, wait for the timer rather than retry at once against a store that is down
      if (!failed && this.pendingLines >= this.maxBatchLines && !this.closed) this.kick();
      else if (this.pending.length > 0 || this.dropped.size > 0) this.schedule();
    });
    this.running = done.catch(() => undefined);
    return done;
  }
}
