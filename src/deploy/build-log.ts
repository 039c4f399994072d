import { EventEmitter } from 'node:events';
import { iso } from '../domain/clock.js';
import type { Deps } from '../deps.js';

export interface LogRow {
  seq: number;
  line: string;
}

/** Lines of one deployment kept longer than this are cut, so one runaway build cannot fill the store. */
export const MAX_LINE = 8192;

/**
 * Every build line of every deployment, in order, in the store (so any replica can replay it),
 * with an in-process signal so that followers on this replica wake up at once. Followers on other
 * replicas find new lines when they poll.
 */
export class BuildLog {
  private readonly signal = new EventEmitter();
  private readonly nextSeq = new Map<string, number>();
  /** appends of one deployment run one after the other, so sequence numbers never collide */
  private readonly tails = new Map<string, Promise<void>>();

  constructor(private readonly deps: Deps) {
    this.signal.setMaxListeners(0);
  }

  append(deploymentId: string, lines: readonly string[]): Promise<void> {
    if (lines.length === 0) return Promise.resolve();
    const run = (this.tails.get(deploymentId) ?? Promise.resolve()).then(() => this.write(deploymentId, lines));
    const tail = run.catch(() => undefined);
    this.tails.set(deploymentId, tail);
    void tail.then(() => {
      if (this.tails.get(deploymentId) === tail) this.tails.delete(deploymentId);
    });
    return run;
  }

  /** Lines after `afterSeq`, oldest first. */
  async read(deploymentId: string, afterSeq: number, limit = 500): Promise<LogRow[]> {
    return this.deps.store.repos.buildLogs.after(deploymentId, afterSeq, limit);
  }

  /** Resolves when this replica appends to the deployment, or after `timeoutMs`. */
  changed(deploymentId: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.signal.off(deploymentId, done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.signal.on(deploymentId, done);
    });
  }

  /** The deployment has ended: drop what this replica kept about it (its lines stay stored). */
  forget(deploymentId: string): void {
    this.nextSeq.delete(deploymentId);
    this.notify(deploymentId);
  }

  /** Wake the followers of a deployment (its status changed). */
  notify(deploymentId: string): void {
    this.signal.emit(deploymentId);
  }

  private async write(deploymentId: string, lines: readonly string[]): Promise<void> {
    const { buildLogs } = this.deps.store.repos;
    const first = this.nextSeq.get(deploymentId) ?? (await buildLogs.lastSeq(deploymentId)) + 1;
    const at = iso(this.deps.clock.now());
    const rows = lines.map((line, i) => ({ deployment_id: deploymentId, seq: first + i, at, line: line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line }));
    await buildLogs.append(rows);
    this.nextSeq.set(deploymentId, first + rows.length);
    this.notify(deploymentId);
  }
}
