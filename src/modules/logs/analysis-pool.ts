// A small pool of worker threads for POST …/logs/analyze (docs/logs-analyzer.md#cost): the
// analysis runs off the event loop, each one within a time budget (past it its worker is
// terminated), and beyond the busy workers a bounded queue waits; past that, work is refused.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { AppError } from '../../domain/errors.js';
import type { BuiltinAnalysis } from './analyzer.js';
import type { Prepared } from './llm.js';

export type AnalysisTask =
  | { kind: 'builtin'; logs: string | readonly string[] }
  | { kind: 'prepare'; logs: string | readonly string[]; secrets: readonly string[] };

export type AnalysisReply =
  | { ok: true; kind: 'builtin'; analysis: BuiltinAnalysis }
  | { ok: true; kind: 'prepare'; prepared: Prepared }
  | { ok: false; error: string };

export interface AnalysisPoolOptions {
  /** worker threads at most (started when first needed); default 1 */
  workers?: number | undefined;
  /** analyses that may wait for a worker; default 4 */
  queue?: number | undefined;
  /** how long one analysis may run; default 5000 ms */
  timeoutMs?: number | undefined;
}

export const ANALYSIS_DEFAULTS = { workers: 1, queue: 4, timeoutMs: 5000 } as const;

/** Analyses per API key: a bucket of their own besides the general limit (`--analyze-rate-limit`). */
export const ANALYZE_RATE_LIMIT = { rate: 1, burst: 5 } as const;

/** How long a worker may take to start (load the analyzer) before it counts as failed. */
const START_TIMEOUT_MS = 30_000;

interface Job {
  task: AnalysisTask;
  resolve: (reply: AnalysisReply) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  ready: Promise<void>;
  job: Job | null;
  timer: NodeJS.Timeout | null;
  retired: boolean;
}

const here = fileURLToPath(import.meta.url);

/**
 * The worker thread: dist/modules/logs/analysis.worker.js when Slipway runs compiled; under the tests,
 * which run the TypeScript sources, the .ts file through tsx (a development dependency), which
 * the worker registers before importing it.
 */
function startWorker(): Worker {
  if (here.endsWith('.js')) return new Worker(new URL('./analysis.worker.js', import.meta.url));
  const api = pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('tsx/esm/api')), 'index.mjs')).href;
  const entry = new URL('./analysis.worker.ts', import.meta.url).href;
  return new Worker(`import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`, { eval: true });
}

const seconds = (ms: number): string => String(ms / 1000);
const shuttingDown = (): AppError => new AppError('UNAVAILABLE', 'The server is shutting down; retry in a few seconds.', { 'retry-after': '5' });

export class AnalysisPool {
  private readonly workers: number;
  private readonly queueSize: number;
  readonly timeoutMs: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private closed = false;

  constructor(opts: AnalysisPoolOptions = {}) {
    this.workers = opts.workers ?? ANALYSIS_DEFAULTS.workers;
    this.queueSize = opts.queue ?? ANALYSIS_DEFAULTS.queue;
    this.timeoutMs = opts.timeoutMs ?? ANALYSIS_DEFAULTS.timeoutMs;
  }

  /** The built-in analysis of `logs`. */
  async analyze(logs: string | readonly string[]): Promise<BuiltinAnalysis> {
    const reply = await this.run({ kind: 'builtin', logs });
    if (reply.ok && reply.kind === 'builtin') return reply.analysis;
    throw failed(reply);
  }

  /** The built-in analysis and the model's request, `secrets` removed. */
  async prepare(logs: string | readonly string[], secrets: readonly string[]): Promise<Prepared> {
    const reply = await this.run({ kind: 'prepare', logs, secrets });
    if (reply.ok && reply.kind === 'prepare') return reply.prepared;
    throw failed(reply);
  }

  /** Terminates every worker; analyses waiting or running fail. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(shuttingDown());
    await Promise.all(this.slots.splice(0).map((slot) => this.retire(slot, shuttingDown())));
  }

  private run(task: AnalysisTask): Promise<AnalysisReply> {
    return new Promise<AnalysisReply>((resolve, reject) => {
      const job: Job = { task, resolve, reject };
      if (this.closed) {
        reject(shuttingDown());
        return;
      }
      const idle = this.slots.find((s) => s.job === null);
      if (idle !== undefined) {
        this.dispatch(idle, job);
        return;
      }
      if (this.slots.length < this.workers) {
        this.dispatch(this.spawn(), job);
        return;
      }
      if (this.queue.length >= this.queueSize) {
        // a place frees when a running analysis ends, within its budget at most
        const wait = Math.max(1, Math.ceil(this.timeoutMs / 1000));
        reject(new AppError('UNAVAILABLE', 'Every log analysis worker is busy and the queue is full; retry in a few seconds.', { 'retry-after': String(wait) }));
        return;
      }
      this.queue.push(job);
    });
  }

  private spawn(): Slot {
    const worker = startWorker();
    // the pool must not keep a stopping process alive
    worker.unref();
    let started: () => void = () => undefined;
    let notStarted: (err: Error) => void = () => undefined;
    const ready = new Promise<void>((resolve, reject) => {
      started = resolve;
      notStarted = reject;
    });
    // a failed start is reported to the job waiting on it, not as an unhandled rejection
    ready.catch(() => undefined);
    const slot: Slot = { worker, ready, job: null, timer: null, retired: false };
    const startTimer = setTimeout(() => { notStarted(new Error('the analysis worker did not start in time')); }, START_TIMEOUT_MS);
    worker.on('message', (msg: AnalysisReply | { ready: true }) => {
      if ('ready' in msg) {
        clearTimeout(startTimer);
        started();
        return;
      }
      const job = slot.job;
      if (job === null) return;
      if (slot.timer !== null) clearTimeout(slot.timer);
      slot.timer = null;
      slot.job = null;
      job.resolve(msg);
      this.next(slot);
    });
    worker.on('error', (err) => {
      clearTimeout(startTimer);
      notStarted(err);
      void this.retire(slot, err);
    });
    worker.on('exit', () => {
      clearTimeout(startTimer);
      notStarted(new Error('the analysis worker stopped'));
      void this.retire(slot, new Error('the analysis worker stopped'));
    });
    this.slots.push(slot);
    return slot;
  }

  private dispatch(slot: Slot, job: Job): void {
    slot.job = job;
    slot.ready.then(
      () => {
        if (slot.job !== job) return;
        // the budget starts when the analysis does, not while its worker loads
        slot.timer = setTimeout(() => {
          void this.retire(slot, new AppError('UNPROCESSABLE', `The analysis of these logs took longer than its budget of ${seconds(this.timeoutMs)} s and was stopped: send fewer or shorter lines.`));
        }, this.timeoutMs);
        slot.worker.postMessage(job.task);
      },
      (err: unknown) => {
        void this.retire(slot, err instanceof Error ? err : new Error(String(err)));
      },
    );
  }

  /** The slot's job, if any, fails with `err`; its worker is terminated and the next waiting job gets a fresh one. */
  private async retire(slot: Slot, err: Error): Promise<void> {
    if (slot.retired) return;
    slot.retired = true;
    const at = this.slots.indexOf(slot);
    if (at !== -1) this.slots.splice(at, 1);
    if (slot.timer !== null) clearTimeout(slot.timer);
    slot.timer = null;
    const job = slot.job;
    slot.job = null;
    job?.reject(err);
    const waiting = this.closed ? undefined : this.queue.shift();
    if (waiting !== undefined) this.dispatch(this.spawn(), waiting);
    await slot.worker.terminate();
  }

  private next(slot: Slot): void {
    const job = this.queue.shift();
    if (job !== undefined) this.dispatch(slot, job);
  }
}

function failed(reply: AnalysisReply): Error {
  // the worker's own exception: a bug, answered as a 500 with the detail in the server log only
  return new Error(`log analysis failed in its worker: ${reply.ok ? 'unexpected reply' : reply.error}`);
}
