import { timingSafeEqual } from 'node:crypto';
import { pipeline, Readable } from 'node:stream';
import { createGzip } from 'node:zlib';
import { invalid, notFound } from '../../domain/errors.js';
import type { Clock } from '../../domain/clock.js';
import { everyInterval } from '../../domain/periodic.js';
import type { LogDirection, LogEntry as StoredLogEntry, LogFilter, LogStore, LogStreamKind, RetentionResult } from '../../domain/logs.js';
import type { Repositories } from '../../store/repositories/index.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { LogPolicy } from './policy.js';
import { resolveProject, type ProjectRef } from '../projects/resolve.js';
import type { Access } from '../../domain/access.js';
import { parseSettings } from '../tenancy/views.js';
import type { LogEntry, LogPage, LogUsage } from './logs.schema.js';

/** The filters of GET …/logs and …/logs/download, as the query string gives them (already checked for shape). */
export interface LogFilterInput {
  direction?: LogDirection | undefined;
  start?: string | undefined;
  end?: string | undefined;
  deployment_id?: string | undefined;
  stream?: LogStreamKind | undefined;
  q?: string | undefined;
}

export interface LogQueryInput extends LogFilterInput {
  limit?: number | undefined;
  cursor?: string | undefined;
}

export interface LogDownload {
  filename: string;
  /** the gzip of the NDJSON, made as it is read: call it only when the body is sent */
  body(): Readable;
}

/** 9999-12-31T23:59:59.999Z, the last instant RFC 3339 can write. */
const MAX_TIME = 253_402_300_799_999;
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;
const CURSOR_PURPOSE = 'log page cursor';
/** Entries per store page of a download: a few hundred KiB of NDJSON in memory at a time. */
const DOWNLOAD_PAGE = 1000;

/** Unix ms of an RFC 3339 timestamp or of a string of digits (Unix ms); `name` is the parameter that sent it. */
export function parseTime(name: string, text: string): number {
  const refuse = () => invalid(`"${name}" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.`);
  if (/^[0-9]{1,15}$/.test(text)) {
    const ms = Number(text);
    if (ms > MAX_TIME) throw refuse();
    return ms;
  }
  const m = RFC3339.exec(text);
  if (m === null) throw refuse();
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const offset = m[8] === undefined ? 0 : (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10]));
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59 || Math.abs(offset) >= 24 * 60 || Number(m[10] ?? 0) > 59) throw refuse();
  const at = new Date(0);
  // setUTCFullYear, not Date.UTC: that one reads the years 0 to 99 as 1900 to 1999
  at.setUTCFullYear(year, month - 1, day);
  at.setUTCHours(hour, minute, second, Number((m[7] ?? '').padEnd(3, '0').slice(0, 3)));
  if (at.getUTCDate() !== day) throw refuse();
  return at.getTime() - offset * 60_000;
}

const entryView = (e: StoredLogEntry): LogEntry => ({
  id: e.id,
  timestamp: new Date(e.timestamp).toISOString(),
  deployment_id: e.deploymentId,
  pod: e.pod,
  stream: e.stream,
  message: e.message,
  level: e.level,
});

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/**
 * The log routes over the LogStore port: queries page by page, downloads streamed as gzip of
 * NDJSON in constant memory, usage, and the retention pass. Deleting a project or workspace
 * deletes its logs in ProjectService and WorkspaceService.
 */
export class LogService {
  private retaining: Promise<RetentionResult> | null = null;

  constructor(
    private readonly repos: Pick<Repositories, 'projects' | 'databases' | 'workspaces'>,
    private readonly logs: LogStore,
    private readonly clock: Clock,
    /** signs the paging cursors */
    private readonly secrets: Pick<SecretBox, 'mac'>,
    private readonly policy: LogPolicy,
  ) {}

  /**
   * One page. The parameters are checked before the project is looked up (docs/api.md#errors).
   * `deployment_id` only narrows: an id that is no deployment of this project matches nothing.
   */
  async query(access: Access, projectSlug: ProjectRef, input: LogQueryInput): Promise<LogPage> {
    const filter = this.filter(input);
    const project = await resolveProject(this.repos, access, projectSlug);
    return this.page(project.id, filter, input);
  }

  /** One page of what a managed database's server printed (its lines are kept under the database's id). */
  async queryDatabase(access: Access, dbSlug: string, input: LogQueryInput): Promise<LogPage> {
    const filter = this.filter(input);
    const database = await this.repos.databases.bySlug(access.workspace.id, dbSlug);
    if (database === undefined) throw notFound('Database');
    return this.page(database.id, filter, input);
  }

  private async page(id: string, filter: LogFilter, input: LogQueryInput): Promise<LogPage> {
    const direction = input.direction ?? 'desc';
    const binding = this.binding(id, direction, filter);
    const cursor = input.cursor === undefined ? undefined : this.openCursor(input.cursor, binding);
    const page = await this.logs.query(id, { ...filter, direction, limit: input.limit, cursor });
    return { entries: page.entries.map(entryView), next_cursor: page.nextCursor === null ? null : this.sealCursor(page.nextCursor, binding) };
  }

  /**
   * Every matching line, oldest first unless `direction` says otherwise (a file reads top to
   * bottom). Each store page becomes one NDJSON chunk only when gzip asks for more, so memory
   * stays constant whatever the size; lines stored while it runs may be included.
   */
  async download(access: Access, projectSlug: ProjectRef, input: LogFilterInput): Promise<LogDownload> {
    const filter = { ...this.filter(input), direction: input.direction ?? 'asc' };
    const project = await resolveProject(this.repos, access, projectSlug);
    const stamp = this.clock.now().toISOString().replace(/\.\d+Z$/, 'Z').replace(/[-:]/g, '');
    const pages = this.logs.stream(project.id, filter, DOWNLOAD_PAGE);
    async function* ndjson(): AsyncGenerator<string> {
      for await (const page of pages) yield page.map((e) => `${JSON.stringify(entryView(e))}\n`).join('');
    }
    return {
      filename: `${project.slug}-logs-${stamp}.ndjson.gz`,
      body: () => {
        const gzip = createGzip();
        // a failure destroys gzip with the error, and the HTTP layer ends the response with it
        pipeline(Readable.from(ndjson(), { highWaterMark: 1 }), gzip, () => undefined);
        return gzip;
      },
    };
  }

  async usage(access: Access, projectSlug: ProjectRef): Promise<LogUsage> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const u = await this.logs.usage(project.id);
    return {
      bytes: u.bytes,
      lines: u.lines,
      oldest: iso(u.oldest),
      newest: iso(u.newest),
      retention_days: parseSettings(access.workspace.settings).log_retention_days,
      dropped_lines: u.droppedLines,
    };
  }

  /**
   * One retention pass: each workspace's `log_retention_days`, then the per-project size cap.
   * The logs of a workspace that is gone go too, which repairs a deletion that failed. Passes of
   * one process do not overlap; those of two replicas may, and the store keeps usage exact.
   */
  enforceRetention(): Promise<RetentionResult> {
    this.retaining ??= this.logs
      .enforceRetention({
        retentionDays: async (workspaceId) => {
          const settings = await this.repos.workspaces.settingsOf(workspaceId);
          return settings === undefined ? null : parseSettings(settings).log_retention_days;
        },
        maxBytesPerProject: this.policy.maxBytesPerProject,
        now: this.clock.now(),
      })
      .finally(() => {
        this.retaining = null;
      });
    return this.retaining;
  }

  /** Runs enforceRetention now and every `everyMs`; the returned function stops it (and waits for a pass in progress). */
  startBackground(everyMs: number, onError: (err: unknown) => void): () => Promise<void> {
    return everyInterval(async () => { await this.enforceRetention(); }, everyMs, onError);
  }

  /** The store's filter from the checked query string: times parsed, a window that is not empty. */
  private filter(input: LogFilterInput): LogFilter {
    const start = input.start === undefined ? undefined : parseTime('start', input.start);
    const end = input.end === undefined ? undefined : parseTime('end', input.end);
    if (start !== undefined && end !== undefined && end <= start) throw invalid('"end" must be later than "start".');
    return { start, end, deploymentId: input.deployment_id, stream: input.stream, q: input.q === '' ? undefined : input.q };
  }

  /** What a cursor is bound to: this project, this direction and these filters (not the limit). */
  private binding(projectId: string, direction: LogDirection, f: LogFilter): string {
    return JSON.stringify([projectId, direction, f.start ?? null, f.end ?? null, f.deploymentId ?? null, f.stream ?? null, f.q ?? null]);
  }

  /**
   * The store's cursor with a MAC under the secret key: a cursor that was altered, or that
   * comes from another project or another query, is refused as a whole (400), never read as a
   * position somewhere else. Replicas share the key, so any of them takes the next page.
   */
  private sealCursor(inner: string, binding: string): string {
    return `${inner}.${this.cursorMac(inner, binding)}`;
  }

  private openCursor(cursor: string, binding: string): string {
    const dot = cursor.indexOf('.');
    const inner = cursor.slice(0, Math.max(dot, 0));
    // compared as text: base64 decoding would ignore some added or changed characters
    const mac = Buffer.from(cursor.slice(dot + 1));
    const expected = Buffer.from(this.cursorMac(inner, binding));
    if (dot < 1 || mac.length !== expected.length || !timingSafeEqual(mac, expected)) {
      throw invalid('"cursor" must be the next_cursor of a previous page of this query, with the same direction and filters.');
    }
    return inner;
  }

  private cursorMac(inner: string, binding: string): string {
    return this.secrets.mac(CURSOR_PURPOSE, `${binding}\n${inner}`).subarray(0, 12).toString('base64url');
  }
}
