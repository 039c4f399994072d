import { iso, type Clock } from '../../domain/clock.js';
import { DATABASE_LABEL } from '../../domain/database.js';
import type { ContainerInfo, ContainerUsage, Runtime } from '../../domain/runtime.js';
import type { MetricsMinute, Repositories } from '../../store/repositories/index.js';
import { ownProcess, readCgroups, type Counters } from './cgroups.js';

export interface SamplerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** A container's use at its last sample. */
export interface ContainerSample extends ContainerUsage {
  at: number;
  /** bytes per second received and sent since the sample before; null when not readable */
  rxRate: number | null;
  txRate: number | null;
  /** bytes received and sent since the sample before */
  rxDelta: number;
  txDelta: number;
}

export interface SamplerOptions {
  runtime: Pick<Runtime, 'runningIds' | 'inspect' | 'stats'>;
  /** where each resource's minutes are written */
  metrics: Repositories['metrics'];
  clock: Clock;
  /** this installation's labels: only its containers are sampled */
  labels: Record<string, string>;
  log: SamplerLog;
  /** default 10 s */
  everyMs?: number;
  /** how counters are read; default: the cgroup files, the engine's stats where they are not visible */
  read?: (c: ContainerInfo) => Promise<Counters | null>;
  /** whether a container's known main process is still its own (a restart gives it another); default: its /proc cgroup names it */
  sameProcess?: (c: ContainerInfo) => Promise<boolean>;
}

/** How long the minutes are kept. */
const KEEP_MS = 8 * 86_400_000;

interface Minute {
  minute: string;
  cpu: number;
  memory: number;
  limit: number | null;
  rx: number;
  tx: number;
  samples: number;
}

/**
 * The resource sampler (docs/uptime.md#resource-metrics), run by the deploy engine's leader: at a
 * fixed interval it reads the CPU, memory and network counters of every container this
 * installation runs (the cgroup files where Slipway shares the host, the engine's stats API
 * otherwise), keeps each container's latest use in memory (the status view answers from it),
 * and sums each project's (or database's) containers into one row per minute in the store (the
 * metrics history and the Prometheus gauges, which every replica reads).
 */
export class ResourceSampler {
  private readonly previous = new Map<string, { at: number; counters: Counters }>();
  private readonly latest = new Map<string, ContainerSample>();
  /** each running container as last inspected: a pass inspects only new or restarted ones */
  private readonly known = new Map<string, ContainerInfo>();
  private readonly minutes = new Map<string, Minute>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastPrune = 0;
  /** whether the cgroup files were readable at the last pass (said once in the log) */
  private mode: 'cgroups' | 'engine' | null = null;

  readonly everyMs: number;
  private readonly runtime: Pick<Runtime, 'runningIds' | 'inspect' | 'stats'>;
  private readonly metrics: Repositories['metrics'];
  private readonly clock: Clock;
  private readonly labels: Record<string, string>;
  private readonly log: SamplerLog;
  private readonly readCounters: (c: ContainerInfo) => Promise<Counters | null>;
  private readonly sameProcess: (c: ContainerInfo) => Promise<boolean>;

  constructor(o: SamplerOptions) {
    this.runtime = o.runtime;
    this.metrics = o.metrics;
    this.clock = o.clock;
    this.labels = o.labels;
    this.log = o.log;
    this.everyMs = o.everyMs ?? 10_000;
    this.readCounters = o.read ?? ((x) => readCgroups(x.id, x.pid));
    this.sameProcess = o.sameProcess ?? ((x) => ownProcess(x.id, x.pid));
  }

  start(): void {
    this.timer = setInterval(() => {
      void this.pass();
    }, this.everyMs);
    this.timer.unref();
    void this.pass();
  }

  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    await this.running;
    await this.flush(true).catch(() => undefined);
  }

  /** The container's use as last sampled, when that is recent (three intervals); null otherwise. */
  usageOf(containerId: string): ContainerUsage | null {
    const s = this.latest.get(containerId);
    if (s === undefined || this.clock.now().getTime() - s.at > 3 * this.everyMs) return null;
    return { cpuMillicores: s.cpuMillicores, memoryBytes: s.memoryBytes, memoryLimitBytes: s.memoryLimitBytes };
  }

  /** One pass (concurrent calls share it). */
  pass(): Promise<void> {
    this.running ??= this.sample()
      .catch((err: unknown) => {
        this.log.warn({ err }, 'resource sampler: a pass failed; the next one tries again');
      })
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /**
   * The running containers: one list call, and an inspection only of those not seen before or
   * whose main process changed since (a restart). With 2,000 containers a pass used to inspect
   * each of them every 10 s.
   */
  private async runningContainers(): Promise<ContainerInfo[]> {
    const ids = await this.runtime.runningIds({ labels: this.labels });
    const present = new Set(ids);
    for (const id of [...this.known.keys()]) if (!present.has(id)) this.known.delete(id);
    const infos = await Promise.all(
      ids.map(async (id) => {
        const known = this.known.get(id);
        if (known !== undefined && (this.mode === 'engine' || (await this.sameProcess(known)))) return known;
        const info = await this.runtime.inspect(id);
        if (info?.state !== 'running') {
          this.known.delete(id);
          return null;
        }
        this.known.set(id, info);
        return info;
      }),
    );
    return infos.filter((c) => c !== null);
  }

  private async sample(): Promise<void> {
    const containers = await this.runningContainers();
    const now = this.clock.now().getTime();
    const minute = `${iso(new Date(now)).slice(0, 16)}:00.000Z`;
    const perResource = new Map<string, { cpu: number; memory: number; limit: number | null; rx: number; tx: number }>();
    const seen = new Set<string>();
    for (const c of containers) {
      const resource = c.owner?.project ?? c.labels[DATABASE_LABEL];
      if (resource === undefined) continue;
      seen.add(c.id);
      const s = await this.read(c, now);
      if (s === null) continue;
      this.latest.set(c.id, s);
      const r = perResource.get(resource) ?? { cpu: 0, memory: 0, limit: null, rx: 0, tx: 0 };
      r.cpu += s.cpuMillicores;
      r.memory += s.memoryBytes;
      r.limit = (r.limit ?? 0) + s.memoryLimitBytes;
      r.rx += s.rxDelta;
      r.tx += s.txDelta;
      perResource.set(resource, r);
    }
    for (const id of [...this.latest.keys()]) if (!seen.has(id)) this.latest.delete(id);
    for (const id of [...this.previous.keys()]) if (!seen.has(id)) this.previous.delete(id);
    // the minutes that ended, written together (one statement per 500 rows, not one per resource)
    const ended: MetricsMinute[] = [];
    for (const [resource, r] of perResource) {
      let m = this.minutes.get(resource);
      if (m !== undefined && m.minute !== minute) {
        ended.push(rowOf(resource, m));
        m = undefined;
      }
      m ??= { minute, cpu: 0, memory: 0, limit: null, rx: 0, tx: 0, samples: 0 };
      m.cpu += r.cpu;
      m.memory += r.memory;
      m.limit = r.limit;
      m.rx += r.rx;
      m.tx += r.tx;
      m.samples++;
      this.minutes.set(resource, m);
    }
    await this.metrics.put(ended);
    await this.flush(false, minute);
    if (now - this.lastPrune > 3_600_000) {
      this.lastPrune = now;
      await this.metrics.prune(iso(new Date(now - KEEP_MS)));
    }
  }

  /** Writes the minutes that ended (all of them on `final`); a running minute is written too, so readers see it. */
  private async flush(final: boolean, current?: string): Promise<void> {
    const rows: MetricsMinute[] = [];
    for (const [resource, m] of this.minutes) {
      rows.push(rowOf(resource, m));
      if (final || m.minute !== current) this.minutes.delete(resource);
    }
    await this.metrics.put(rows);
  }

  /** A container's use now: from its counters and the previous ones (CPU and network are deltas). */
  private async read(c: ContainerInfo, now: number): Promise<ContainerSample | null> {
    const counters = await this.readCounters(c).catch(() => null);
    if (counters === null) {
      if (this.mode !== 'engine') {
        this.mode = 'engine';
        this.log.info({}, 'resource sampler: cgroup files are not visible here; asking the engine for stats');
      }
      const usage = await this.runtime.stats(c.id).catch(() => null);
      return usage === null ? null : { ...usage, at: now, rxRate: null, txRate: null, rxDelta: 0, txDelta: 0 };
    }
    this.mode = 'cgroups';
    const before = this.previous.get(c.id);
    this.previous.set(c.id, { at: now, counters });
    const seconds = before === undefined ? 0 : (now - before.at) / 1000;
    const delta = (a: number | null, b: number | null | undefined) => (a === null || b === null || b === undefined ? null : Math.max(0, a - b));
    const rate = (a: number | null, b: number | null | undefined) => {
      const d = delta(a, b);
      return d === null || seconds <= 0 ? null : d / seconds;
    };
    const cpuRate = rate(counters.cpuNs, before?.counters.cpuNs);
    return {
      at: now,
      // ns of CPU per second / 1e6 = millicores
      cpuMillicores: cpuRate === null ? 0 : Math.round(cpuRate / 1e6),
      memoryBytes: counters.memoryBytes,
      memoryLimitBytes: counters.memoryLimitBytes ?? c.memoryBytes ?? 0,
      rxRate: rate(counters.rxBytes, before?.counters.rxBytes),
      txRate: rate(counters.txBytes, before?.counters.txBytes),
      rxDelta: delta(counters.rxBytes, before?.counters.rxBytes) ?? 0,
      txDelta: delta(counters.txBytes, before?.counters.txBytes) ?? 0,
    };
  }
}

function rowOf(resource: string, m: Minute): MetricsMinute {
  const n = Math.max(1, m.samples);
  return {
    resource_id: resource,
    minute: m.minute,
    cpu_millicores: Math.round(m.cpu / n),
    memory_bytes: Math.round(m.memory / n),
    memory_limit_bytes: m.limit,
    rx_bytes: Math.round(m.rx),
    tx_bytes: Math.round(m.tx),
    samples: m.samples,
  };
}
