import type { Clock } from '../../../domain/clock.js';
import { isLive } from '../../../domain/deployment.js';
import type { Runtime } from '../../../domain/runtime.js';
import type { Repositories } from '../../../store/repositories/index.js';
import { PROJECT_LABEL, type EngineLog } from './containers.js';

export interface RetentionOptions {
  /** the workspaces that exist; the deployments' images */
  repos: Pick<Repositories, 'workspaces' | 'deployments'>;
  runtime: Runtime;
  clock: Clock;
  log: EngineLog;
  /** the instance's labels: only what this installation made is swept */
  labels: Record<string, string>;
  /** images kept per project besides those of deployments in progress or running */
  keep: number;
  /** how often the sweeps run (due()) */
  everyMs: number;
  /** a workspace network was removed (Slipway's container must join its successor again) */
  forgetNetwork: (name: string) => void;
  /** whether a network of this installation is named the current way (older versions named them `ws-<slug>`); default: all are */
  currentNetwork?: (name: string) => boolean;
}

/** How old a network must be before a sweep may remove it (see sweepNetworks). */
export const NETWORK_GRACE_MS = 5_000;

/**
 * What the engine keeps once it is no longer needed, and its removal: the images of old
 * deployments beyond the newest `keep` per project (rollback targets) and of deleted projects,
 * and the networks of deleted workspaces. The reconciler runs both sweeps when due(), each as
 * a step of its own; what cannot go yet (still in use) is tried again at the next sweep.
 */
export class Retention {
  /** when the sweeps last ran, on the injected clock */
  private lastSweep = 0;

  private readonly repos: RetentionOptions['repos'];
  private readonly runtime: Runtime;
  private readonly clock: Clock;
  private readonly log: EngineLog;
  private readonly labels: Record<string, string>;
  private readonly keep: number;
  private readonly everyMs: number;
  private readonly forgetNetwork: (name: string) => void;
  private readonly currentNetwork: ((name: string) => boolean) | undefined;

  constructor(o: RetentionOptions) {
    this.repos = o.repos;
    this.runtime = o.runtime;
    this.clock = o.clock;
    this.log = o.log;
    this.labels = o.labels;
    this.keep = o.keep;
    this.everyMs = o.everyMs;
    this.forgetNetwork = o.forgetNetwork;
    this.currentNetwork = o.currentNetwork;
  }

  /** Whether the sweeps are due (at most once every `everyMs`); a true answer counts as their run. */
  due(): boolean {
    const now = this.clock.now().getTime();
    if (now - this.lastSweep < this.everyMs) return false;
    this.lastSweep = now;
    return true;
  }

  /**
   * Removes the workspace networks of deleted workspaces, and those an older version named
   * `ws-<slug>`, once no container uses them.
   */
  async sweepNetworks(): Promise<void> {
    const { repos, runtime } = this;
    // A network made after this read (a new workspace's first deploy, its container not started
    // yet) is not judged now: only networks older than the read, with a margin for the engine's clock.
    const judgedBefore = this.clock.now().getTime() - NETWORK_GRACE_MS;
    const workspaces = await repos.workspaces.ids();
    for (const n of await runtime.listNetworks({ labels: this.labels })) {
      if (n.workspace === null) continue;
      if (n.created !== null && n.created.getTime() > judgedBefore) continue;
      if (workspaces.has(n.workspace)) {
        if (this.currentNetwork?.(n.name) !== false) continue;
        // named by an older version: it goes once its containers were replaced by ones on the current network
        if (await runtime.removeNetwork(n.id).catch(() => false)) {
          this.log.info({ network: n.name }, 'removed a workspace network of an older version, which no container uses any more');
          this.forgetNetwork(n.name);
        }
        continue;
      }
      try {
        if (await runtime.removeNetwork(n.id)) this.log.info({ network: n.name }, 'removed the network of a deleted workspace');
        this.forgetNetwork(n.name);
      } catch (err) {
        // a container of it is still being removed: the next sweep tries again
        this.log.warn({ err, network: n.name }, 'the network of a deleted workspace could not be removed yet');
      }
    }
  }

  /**
   * Removes the images no deployment needs: a project keeps the images of its deployments in
   * progress or running and of its `keep` newest deployments (rollback targets); images of
   * deleted projects go too. A removed image's deployments show `image: null` from then on.
   */
  async sweepImages(): Promise<void> {
    const { repos, runtime, keep } = this;
    const { deployments } = repos;
    // An image built after this read (its deployment not yet recorded with it) is not judged
    // now: only images older than the read, with a margin for the engine's whole seconds.
    const judgedBefore = this.clock.now().getTime() - 5_000;
    const rows = await deployments.withImages();
    // A project with a rollout in progress keeps all its images this time: its build may have
    // just tagged an older, cached image that its deployment does not name yet.
    const busy = await deployments.projectsInProgress();
    const needed = new Set<string>();
    const seen = new Map<string, number>();
    for (const r of rows) {
      const n = (seen.get(r.project_id) ?? 0) + 1;
      seen.set(r.project_id, n);
      if (r.image !== null && (n <= keep || isLive(r.status))) needed.add(r.image);
    }
    const removed: string[] = [];
    for (const image of await runtime.listImages({ labels: this.labels })) {
      const project = image.labels[PROJECT_LABEL];
      if (image.tags.length === 0 || image.tags.some((t) => needed.has(t)) || image.createdAt.getTime() >= judgedBefore || (project !== undefined && busy.has(project))) continue;
      try {
        for (const tag of image.tags) await runtime.removeImage(tag);
        removed.push(...image.tags);
      } catch (err) {
        // still used by a container (a rollout that began since the read): the next sweep decides again
        this.log.warn({ err, image: image.tags[0] }, 'an unneeded image could not be removed');
      }
    }
    if (removed.length > 0) {
      this.log.info({ images: removed.length }, 'removed images no deployment needs');
      await deployments.forgetImages(removed);
    }
  }
}
