import type { CollectionCursor, DroppedLines, LogLine, LogStore } from '../../domain/logs.js';
import { DATABASE_LABEL } from '../../domain/database.js';
import type { ContainerInfo, Feed, Labels, LogLine as EngineLine, Owner, Runtime, RuntimeEvent } from '../../domain/runtime.js';
import { statedLevel } from './lines.js';
import type { LogWriter } from './log-writer.js';

export interface CollectorLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface LogCollectorOptions {
  runtime: Pick<Runtime, 'list' | 'inspect' | 'logs' | 'events'>;
  /** the log store's collection cursors: where each container's output was stored up to */
  logs: Pick<LogStore, 'cursors' | 'forgetCursors'>;
  writer: Pick<LogWriter, 'write' | 'close' | 'buffered'>;
  /** the labels every container of this installation carries (its instance label) */
  labels: Labels;
  /** false once a project is deleted: its containers wait for the reconciler, and their lines must not bring its logs back */
  projectExists: (projectId: string) => Promise<boolean>;
  log: CollectorLog;
  /** longer lines are cut to this many bytes and marked (default 16 KiB) */
  maxLineBytes?: number;
  /** lines per second one container may write; the excess is dropped and counted (default 1000) */
  ratePerSecond?: number;
  /** how often every container is looked at again, for a missed event (default 10 s) */
  rescanEveryMs?: number;
  /** while the writer holds this many lines, the followers stop reading (default 20,000; keep it well below the writer's own bound, which drops past it) */
  pauseAtBufferedLines?: number;
}

/** What a follower reads its container with and hands the lines to, and its bounds. */
type FollowerSettings = Pick<LogCollectorOptions, 'runtime' | 'writer' | 'log'> & { maxLineBytes: number; ratePerSecond: number; pauseAtBufferedLines: number };

const MAX_LINE_BYTES = 16 * 1024;
/** the engine driver's workspace label (src/adapters/runtime/docker/labels.ts), on every managed container */
const WORKSPACE_LABEL = 'slipway.workspace';
const RATE_PER_SECOND = 1000;
const RESCAN_EVERY_MS = 10_000;
/**
 * While the writer holds this many lines, the followers stop reading: the engine keeps the rest
 * in its log file, and the store catches up instead of the writer dropping lines.
 */
const WRITER_HIGH_WATER = 20_000;
/** after a container's feed ends, how long before it is looked at again (a restart, a last catch-up) */
const RECHECK_MS = 500;

/** Where collection stands in one stream of a container: the last line taken and how many lines share its time stamp. */
interface StreamPosition {
  timestamp: string;
  count: number;
}

/**
 * Per stream: the engine orders each stream by time, but not the two against each other (its
 * copiers of stdout and stderr write the log file concurrently), so one position for both would
 * lose or repeat lines at a resume.
 */
type Position = Readonly<Record<'stdout' | 'stderr', StreamPosition | null>>;

/** How far before the earlier stream's position a resume asks from: more than the two streams ever lie apart in the engine's file. */
const STREAM_SKEW_MS = 1000;

/** The cursor's `timestamp`: `stdout=<stamp>#<count> stderr=<stamp>#<count>`, either part absent while its stream has no line. */
export function encodePosition(p: Position): { timestamp: string; atTimestamp: number } {
  const parts = (['stdout', 'stderr'] as const).flatMap((k) => {
    const s = p[k];
    return s === null ? [] : [`${k}=${s.timestamp}#${s.count.toString()}`];
  });
  return { timestamp: parts.join(' '), atTimestamp: (p.stdout?.count ?? 0) + (p.stderr?.count ?? 0) };
}

/** A stored cursor back into a position; a bare time stamp (written by another collector) counts for both streams. */
export function decodePosition(c: { timestamp: string; atTimestamp: number }): Position {
  if (!c.timestamp.includes('=')) {
    const both = { timestamp: c.timestamp, count: c.atTimestamp };
    return { stdout: both, stderr: both };
  }
  const out: Record<'stdout' | 'stderr', StreamPosition | null> = { stdout: null, stderr: null };
  for (const part of c.timestamp.split(' ')) {
    const m = /^(stdout|stderr)=(\S+)#(\d+)$/.exec(part);
    if (m?.[1] === 'stdout' || m?.[1] === 'stderr') out[m[1]] = { timestamp: m[2] ?? '', count: Number(m[3]) };
  }
  return out;
}

/** Where the engine is asked to start: before both streams' positions by more than their skew. */
export function sinceOf(p: Position): Date | undefined {
  const times = [p.stdout, p.stderr].flatMap((s) => (s === null ? [] : [Date.parse(s.timestamp)]));
  return times.length === 0 ? undefined : new Date(Math.min(...times) - STREAM_SKEW_MS);
}

/**
 * Follows the output of every container of this installation and hands it to the LogWriter:
 * lines cut past `maxLineBytes`, a level read from JSON and logfmt lines, and at most
 * `ratePerSecond` lines per container and second. Containers are found at start, on the engine's
 * start events and by a periodic rescan, so a missed event delays lines but loses none. Each
 * container resumes from its cursor (the engine's exact time stamp of the last stored line and
 * how many lines carry it), which the store keeps with the lines: a restart of the container, a
 * rollout or a restart of Slipway (even a kill -9) loses no line and stores none twice
 * (docs/logs.md#collection). Only the deploy engine's leader runs one.
 */
export class LogCollector {
  private readonly maxLineBytes: number;
  private readonly rate: number;
  private readonly rescanEveryMs: number;
  private readonly followers = new Map<string, Follower>();
  /** per container, once its feed ended: the state its output was read up to */
  private readonly readUpTo = new Map<string, string>();
  /** the positions this process reached; ahead of the stored cursors while the writer holds lines */
  private readonly positions = new Map<string, Position>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private events: Feed<RuntimeEvent> | null = null;
  private rescanTimer: NodeJS.Timeout | null = null;
  private scanning: Promise<void> | null = null;
  /** removed containers whose stored cursors go at the next rescan, once the writer has stored their last lines */
  private removed = new Set<string>();
  private stopped = false;

  private readonly runtime: LogCollectorOptions['runtime'];
  private readonly logs: LogCollectorOptions['logs'];
  private readonly writer: LogCollectorOptions['writer'];
  private readonly labels: Labels;
  private readonly projectExists: (projectId: string) => Promise<boolean>;
  private readonly log: CollectorLog;
  private readonly settings: FollowerSettings;

  constructor(o: LogCollectorOptions) {
    this.runtime = o.runtime;
    this.logs = o.logs;
    this.writer = o.writer;
    this.labels = o.labels;
    this.projectExists = o.projectExists;
    this.log = o.log;
    this.maxLineBytes = o.maxLineBytes ?? MAX_LINE_BYTES;
    this.rate = o.ratePerSecond ?? RATE_PER_SECOND;
    this.rescanEveryMs = o.rescanEveryMs ?? RESCAN_EVERY_MS;
    this.settings = { runtime: o.runtime, writer: o.writer, log: o.log, maxLineBytes: this.maxLineBytes, ratePerSecond: this.rate, pauseAtBufferedLines: o.pauseAtBufferedLines ?? WRITER_HIGH_WATER };
  }

  /** Containers followed now. */
  get following(): number {
    return this.followers.size;
  }

  /** Subscribes to the engine's events, then follows every container there is. */
  async start(): Promise<void> {
    await this.subscribe();
    await this.rescan();
    this.rescanTimer = setInterval(() => {
      void this.rescan();
    }, this.rescanEveryMs);
    this.rescanTimer.unref();
  }

  /** Closes every feed and stores what was read. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.rescanTimer !== null) clearInterval(this.rescanTimer);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.events?.close();
    await this.scanning;
    const running = [...this.followers.values()];
    for (const f of running) f.close();
    await Promise.all(running.map((f) => f.done));
    try {
      await this.writer.close();
    } catch (err) {
      this.log.error({ err }, 'log collector: the last lines could not be stored; the next leader reads them again');
    }
  }

  /** Every container once more: one that is running and not followed, or stopped since its output was last read. */
  rescan(): Promise<void> {
    if (this.scanning !== null) return this.scanning;
    const scan = (async () => {
      try {
        if (this.events === null) await this.subscribe();
        await this.forgetRemoved();
        const containers = await this.runtime.list({ labels: this.labels });
        const gone = new Set(this.followers.keys());
        const exists = new Map<string, Promise<boolean>>();
        for (const c of containers) {
          gone.delete(c.id);
          const source = logSourceOf(c);
          if (source === null) continue;
          const project = source.project;
          let known = exists.get(project);
          if (known === undefined) exists.set(project, (known = this.projectExists(project)));
          if (!(await known)) {
            this.followers.get(c.id)?.close({ discard: true });
            continue;
          }
          this.consider(c);
        }
        // removed containers: their feeds have ended or will; nothing more to resume
        const present = new Set(containers.map((c) => c.id));
        for (const id of [...this.readUpTo.keys()]) if (!present.has(id)) this.forget(id);
        for (const id of gone) this.followers.get(id)?.close();
      } catch (err) {
        this.log.warn({ err }, 'log collector: cannot list the containers; trying again later');
      } finally {
        this.scanning = null;
      }
    })();
    this.scanning = scan;
    return scan;
  }

  private async subscribe(): Promise<void> {
    if (this.stopped) return;
    let feed: Feed<RuntimeEvent>;
    try {
      feed = await this.runtime.events({ labels: this.labels });
    } catch (err) {
      this.log.warn({ err }, 'log collector: cannot subscribe to engine events; the rescan finds new containers meanwhile');
      return;
    }
    this.events = feed;
    void (async () => {
      try {
        for await (const e of feed) if (e.type === 'start') this.check(e.containerId);
      } catch (err) {
        if (!this.stopped) this.log.warn({ err }, 'log collector: the engine event feed failed; subscribing again at the next rescan');
      } finally {
        if (this.events === feed) this.events = null;
      }
    })();
  }

  /** Looks at one container again (a start event, a feed that ended). */
  private check(containerId: string): void {
    if (this.stopped || this.followers.has(containerId)) return;
    void (async () => {
      try {
        const c = await this.runtime.inspect(containerId);
        if (c === null) {
          this.forget(containerId);
          return;
        }
        const source = logSourceOf(c);
        if (source === null || !(await this.projectExists(source.project))) return;
        this.consider(c);
      } catch (err) {
        this.log.warn({ err, container: containerId }, 'log collector: cannot inspect a container; the rescan tries again');
      }
    })();
  }

  private consider(c: ContainerInfo): void {
    if (this.stopped || logSourceOf(c) === null || this.followers.has(c.id)) return;
    const state = stateOf(c);
    if (c.state !== 'running' && this.readUpTo.get(c.id) === state) return;
    const f = new Follower(this, c, state);
    this.followers.set(c.id, f);
    f.done = f.run().finally(() => {
      this.followers.delete(c.id);
      if (f.failed) {
        // left to the rescan: an engine that cannot give this container's logs is not asked in a loop
        this.readUpTo.set(c.id, state);
        return;
      }
      this.readUpTo.set(c.id, state);
      // it stopped (or restarted meanwhile): read once more to the end of the run that just ended
      this.later(RECHECK_MS, () => { this.check(c.id); });
    });
  }

  private forget(containerId: string): void {
    if (this.readUpTo.delete(containerId) || this.positions.delete(containerId)) this.removed.add(containerId);
    this.positions.delete(containerId);
  }

  /**
   * The stored cursors of containers removed before the last rescan: a removed container never
   * runs again. Those still followed (their last lines on the way to the store) wait a rescan more.
   */
  private async forgetRemoved(): Promise<void> {
    const done = [...this.removed].filter((id) => !this.followers.has(id));
    if (done.length === 0) return;
    try {
      await this.logs.forgetCursors(done);
      for (const id of done) this.removed.delete(id);
    } catch (err) {
      this.log.warn({ err }, 'log collector: cannot forget the cursors of removed containers; trying again later');
    }
  }

  private later(ms: number, fn: () => void): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    t.unref();
    this.timers.add(t);
  }

  /** @internal for the followers */
  get options(): FollowerSettings {
    return this.settings;
  }

  /** @internal for the followers */
  async position(containerId: string): Promise<Position | null> {
    const mine = this.positions.get(containerId);
    if (mine !== undefined) return mine;
    const stored = (await this.logs.cursors([containerId])).get(containerId);
    return stored === undefined ? null : decodePosition(stored);
  }

  /** @internal for the followers */
  setPosition(containerId: string, p: Position): void {
    this.positions.set(containerId, p);
  }
}

/**
 * Whose logs a container's output is: an app's container names its project and deployment; a
 * managed database's server has its lines kept under the database's id (project and deployment
 * both), so that its logs are queried, retained and deleted like a project's.
 */
export function logSourceOf(c: Pick<ContainerInfo, 'owner' | 'labels'>): Owner | null {
  if (c.owner !== null) return c.owner;
  const database = c.labels[DATABASE_LABEL];
  const workspace = c.labels[WORKSPACE_LABEL];
  return database === undefined || workspace === undefined ? null : { workspace, project: database, deployment: database };
}

/** A run of the engine's time stamp (`…:05.123Z` or `…:05.123456789Z`) that sorts as text. */
export function stampKey(timestamp: string): string {
  return timestamp.replace(/(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/, (_m, fraction: string | undefined, zone: string) => `.${(fraction ?? '').padEnd(9, '0')}${zone}`);
}

/** Fixed per container run: a feed that ended while this is unchanged has read all of that run. */
const stateOf = (c: ContainerInfo): string => `${c.state} ${c.restartCount.toString()} ${c.startedAt?.toISOString() ?? '-'} ${c.finishedAt?.toISOString() ?? '-'}`;

/**
 * Skips what the store already holds of one stream: lines before the position's time stamp, and
 * the first `count` lines at it (the engine's `since` is inclusive, and several lines may share
 * one time stamp). Everything after that is new.
 */
export class ResumePoint {
  private key: string | null;
  private skip: number;

  constructor(position: StreamPosition | null) {
    this.key = position === null ? null : stampKey(position.timestamp);
    this.skip = position?.count ?? 0;
  }

  /** true: already stored */
  seen(timestamp: string): boolean {
    if (this.key === null) return false;
    const key = stampKey(timestamp);
    if (key < this.key) return true;
    if (key === this.key && this.skip > 0) {
      this.skip--;
      return true;
    }
    this.key = null;
    return false;
  }
}

/** Cuts a message past `maxBytes` (on a character boundary) to `maxBytes` with its mark, which says how long it was. */
export function cutLine(message: string, maxBytes: number): string {
  if (message.length <= maxBytes / 4) return message;
  const bytes = Buffer.from(message, 'utf8');
  if (bytes.length <= maxBytes) return message;
  const mark = ` … [cut: ${bytes.length.toString()} bytes]`;
  let end = Math.max(0, maxBytes - Buffer.byteLength(mark));
  // not inside a UTF-8 sequence: continuation bytes are 10xxxxxx
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return `${bytes.subarray(0, end).toString('utf8')}${mark}`;
}

/** The level a JSON (`level`, `severity`, `lvl`; pino's numbers too) or logfmt (`level=`) line names; null otherwise. */
export const levelOf = (message: string): string | null => statedLevel(message);

/** One container's feed: from its cursor to the end of its current run (or until closed). */
class Follower {
  done: Promise<void> = Promise.resolve();
  failed = false;
  private feed: Feed<EngineLine> | null = null;
  private closed = false;
  private discarded = false;
  private position: Position | null = null;
  /** the position after the last line handed to the writer, while dropped lines wait for their marker */
  private safe: Position | null = null;
  private pending: LogLine[] = [];
  private flushing: NodeJS.Immediate | null = null;
  /** the current second, counted from its first line's engine time */
  private window = { start: Number.NEGATIVE_INFINITY, kept: 0, dropped: 0, lastAt: 0 };
  private markerTimer: NodeJS.Timeout | null = null;
  private droppedHere = 0;
  private readonly projectId: string;
  private readonly workspaceId: string;
  private readonly deploymentId: string;

  constructor(
    private readonly collector: LogCollector,
    private readonly c: ContainerInfo,
    private readonly state: string,
  ) {
    const owner = logSourceOf(c);
    if (owner === null) throw new Error('only managed containers are followed');
    this.projectId = owner.project;
    this.workspaceId = owner.workspace;
    this.deploymentId = owner.deployment;
  }

  isClosed(): boolean {
    return this.closed;
  }

  /** `discard`: the project is gone, and what was read but not handed over is not stored */
  close(opts: { discard?: boolean } = {}): void {
    this.closed = true;
    if (opts.discard === true) this.discarded = true;
    this.feed?.close();
  }

  async run(): Promise<void> {
    const o = this.collector.options;
    try {
      this.position = await this.collector.position(this.c.id);
      this.safe = this.position;
      if (this.closed) return;
      const since = this.position === null ? undefined : sinceOf(this.position);
      this.feed = await o.runtime.logs(this.c.id, { follow: true, ...(since === undefined ? {} : { since }) });
      // closed while the engine answered
      if (this.isClosed()) this.feed.close();
      const resume = { stdout: new ResumePoint(this.position?.stdout ?? null), stderr: new ResumePoint(this.position?.stderr ?? null) };
      for await (const line of this.feed) {
        if (resume[line.stream].seen(line.timestamp)) continue;
        this.take(line);
        // the store is behind: hand over what this feed holds, and read on once the store has
        // caught up (the feed pauses the engine's stream meanwhile, and the engine keeps the lines)
        if (this.pending.length + o.writer.buffered >= o.pauseAtBufferedLines) {
          this.flush();
          while (o.writer.buffered >= o.pauseAtBufferedLines && !this.isClosed()) await new Promise((r) => setTimeout(r, 20));
        }
      }
    } catch (err) {
      if (!this.closed) {
        this.failed = true;
        o.log.warn({ err, container: this.c.id, state: this.state }, 'log collector: cannot read a container\'s output; trying again at the next rescan');
      }
    } finally {
      if (this.markerTimer !== null) clearTimeout(this.markerTimer);
      this.marker();
      this.flush();
    }
  }

  private take(line: EngineLine): void {
    const o = this.collector.options;
    const p = this.position?.[line.stream] ?? null;
    const next = p !== null && p.timestamp === line.timestamp ? { timestamp: p.timestamp, count: p.count + 1 } : { timestamp: line.timestamp, count: 1 };
    const other = line.stream === 'stdout' ? this.position?.stderr ?? null : this.position?.stdout ?? null;
    this.position = line.stream === 'stdout' ? { stdout: next, stderr: other } : { stdout: other, stderr: next };
    this.collector.setPosition(this.c.id, this.position);
    const at = line.at.getTime();
    const w = this.window;
    if (at >= w.start + 1000 || at < w.start) {
      this.marker();
      this.window = { start: at, kept: 0, dropped: 0, lastAt: at };
    }
    if (this.window.kept < o.ratePerSecond) {
      this.window.kept++;
      const level = line.message.length <= o.maxLineBytes ? levelOf(line.message) : null;
      this.push(cutLine(line.message, o.maxLineBytes), line.stream, at, level);
      if (this.window.dropped === 0) this.safe = this.position;
    } else {
      this.window.dropped++;
      this.window.lastAt = at;
      // a container that goes quiet after a burst still gets its marker
      this.markerTimer ??= setTimeout(() => {
        this.markerTimer = null;
        this.marker();
        this.schedule();
      }, 1100);
      this.markerTimer.unref();
    }
    this.schedule();
  }

  /** One line in place of the lines dropped in the current second. */
  private marker(): void {
    const w = this.window;
    if (w.dropped === 0) return;
    const rate = this.collector.options.ratePerSecond;
    this.push(`[slipway] dropped ${w.dropped.toString()} lines: over ${rate.toString()} lines/s`, 'stderr', w.lastAt, 'warn', w.dropped);
    w.dropped = 0;
    this.safe = this.position;
  }

  private push(message: string, stream: LogLine['stream'], timestamp: number, level: string | null, dropped = 0): void {
    // one object per line of one fixed shape, built at once (a spread per line showed in the ingest profile)
    this.pending.push({ projectId: this.projectId, workspaceId: this.workspaceId, deploymentId: this.deploymentId, pod: this.c.name, stream, timestamp, message, level });
    this.droppedHere += dropped;
  }

  private schedule(): void {
    // the feed hands over what the engine sent in one go before this runs: one write per chunk
    this.flushing ??= setImmediate(() => {
      this.flushing = null;
      this.flush();
    });
  }

  private flush(): void {
    if (this.flushing !== null) clearImmediate(this.flushing);
    this.flushing = null;
    if (this.discarded) {
      this.pending = [];
      this.droppedHere = 0;
      return;
    }
    const p = this.safe;
    if (this.pending.length === 0 && this.droppedHere === 0) return;
    const cursor: CollectionCursor | undefined = p === null ? undefined : { containerId: this.c.id, projectId: this.projectId, workspaceId: this.workspaceId, ...encodePosition(p) };
    const dropped: DroppedLines | undefined = this.droppedHere === 0 ? undefined : { projectId: this.projectId, workspaceId: this.workspaceId, lines: this.droppedHere };
    const lines = this.pending;
    this.pending = [];
    this.droppedHere = 0;
    this.collector.options.writer.write(lines, cursor, dropped);
  }
}
