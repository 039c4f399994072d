import { performance } from 'node:perf_hooks';

/**
 * Where one deployment's time went, phase by phase (milliseconds on the monotonic clock): the
 * rollout logs it as `deployment phases` when the deployment ends, and the deploy bench reads it
 * (docs/deploys.md#speed).
 */
export class Phases {
  private last = performance.now();
  private readonly first = this.last;
  readonly ms: Record<string, number> = {};

  /** The time since the previous mark (or the start) is `name`'s. */
  mark(name: string): void {
    const now = performance.now();
    this.ms[name] = Math.round((this.ms[name] ?? 0) + now - this.last);
    this.last = now;
  }

  /** Every phase, and the total since the start. */
  report(): Record<string, number> {
    return { ...this.ms, total: Math.round(performance.now() - this.first) };
  }
}
