import { EventEmitter } from 'node:events';
import type { Clock } from '../../domain/clock.js';
import type { LogLine, LogStore } from '../../domain/logs.js';
import type { Repositories } from '../../store/repositories/index.js';

/** Lines of one deployment kept longer than this are cut, so one runaway build cannot fill the store. */
export const MAX_LINE = 8192;

/** The `pod` of a build line in the log store: the builder, not a replica. */
export const BUILD_POD = 'builder';

/** Where a reader of one deployment's build log stands (opaque to the route). */
export type BuildLogPosition =
  /** nothing read yet */
  | { kind: 'start' }
  /** in the log store: after this line id */
  | { kind: 'store'; afterId: number }
  /** a deployment built before build lines moved to the log store: its `deployment_logs` rows, after this sequence number */
  | { kind: 'legacy'; afterSeq: number };

export const BUILD_LOG_START: BuildLogPosition = { kind: 'start' };

/**
 * Every build line of every deployment, in order, in the log store (stream `build`, pod
 * `builder`: docs/logs.md#build-lines), so that any replica can replay it and that retention,
 * the size cap, usage, deletion and the project's log routes cover it, with an in-process signal
 * so that followers on this replica wake up at once. Followers on other replicas find new lines
 * when they poll. The project's live tail is told of every stored batch (`onStored`).
 */
export class BuildLog {
  private readonly signal = new EventEmitter();
  /** appends of one deployment run one after the other, so lines keep their order */
  private readonly tails = new Map<string, Promise<void>>();
  /** the project and workspace of a deployment being built */
  private readonly owners = new Map<string, { projectId: string; workspaceId: string }>();

  constructor(
    private readonly repos: Pick<Repositories, 'buildLogs' | 'deployments'>,
    private readonly logs: Pick<LogStore, 'after' | 'append'>,
    private readonly clock: Clock,
    private readonly onStored: (projectId: string) => void = () => undefined,
  ) {
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

  /** Lines of the deployment (of `projectId`) after `position`, oldest first, and the position after them. */
  async read(projectId: string, deploymentId: string, position: BuildLogPosition, limit = 500): Promise<{ lines: string[]; position: BuildLogPosition }> {
    if (position.kind === 'legacy') {
      const rows = await this.repos.buildLogs.after(deploymentId, position.afterSeq, limit);
      return { lines: rows.map((r) => r.line), position: { kind: 'legacy', afterSeq: rows.at(-1)?.seq ?? position.afterSeq } };
    }
    const afterId = position.kind === 'store' ? position.afterId : 0;
    const entries = await this.logs.after(projectId, { afterId }, limit, { deploymentId, stream: 'build' });
    const last = entries.at(-1);
    if (last !== undefined) return { lines: entries.map((e) => e.message), position: { kind: 'store', afterId: last.id } };
    if (position.kind === 'start') {
      // written before build lines moved to the log store
      const legacy = await this.repos.buildLogs.after(deploymentId, 0, limit);
      const lastLegacy = legacy.at(-1);
      if (lastLegacy !== undefined) return { lines: legacy.map((r) => r.line), position: { kind: 'legacy', afterSeq: lastLegacy.seq } };
    }
    return { lines: [], position };
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
    this.owners.delete(deploymentId);
    this.notify(deploymentId);
  }

  /** Wake the followers of a deployment (its status changed). */
  notify(deploymentId: string): void {
    this.signal.emit(deploymentId);
  }

  private async write(deploymentId: string, lines: readonly string[]): Promise<void> {
    let owner = this.owners.get(deploymentId);
    if (owner === undefined) {
      const row = await this.repos.deployments.owner(deploymentId);
      // the project (and so the deployment) was deleted: its logs went with it
      if (row === undefined) return;
      owner = { projectId: row.project_id, workspaceId: row.workspace_id };
      this.owners.set(deploymentId, owner);
    }
    const timestamp = this.clock.now().getTime();
    const { projectId, workspaceId } = owner;
    const stored: LogLine[] = lines.map((line) => ({
      projectId,
      workspaceId,
      deploymentId,
      pod: BUILD_POD,
      stream: 'build',
      timestamp,
      message: line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line,
    }));
    await this.logs.append({ lines: stored });
    this.onStored(projectId);
    this.notify(deploymentId);
  }
}
