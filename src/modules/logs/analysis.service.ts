import { invalid } from '../../domain/errors.js';
import type { LogStore } from '../../domain/logs.js';
import type { Repositories } from '../../store/repositories/index.js';
import type { EnvService } from '../env/env.service.js';
import { resolveProject, type ProjectRef } from '../projects/resolve.js';
import type { Access } from '../../domain/access.js';
import type { Analysis } from './analyzer.js';
import type { AnalysisPool } from './analysis-pool.js';
import type { LlmAnalyzer } from './llm.js';

/** The most text `POST …/logs/analyze` takes, in UTF-8 bytes. */
export const MAX_ANALYZE_BYTES = 1024 * 1024;
/** What is analysed when no text is given: the project's newest lines. */
export const RECENT_LINES = 1000;

/**
 * `POST …/logs/analyze`: the built-in analyzer over the text given, or over the project's last
 * RECENT_LINES lines; with `--llm-base-url`, the model is asked too (docs/logs-analyzer.md), and
 * any failure of it answers the built-in result. The analysis and the model's request are made
 * by the worker pool, off the event loop and within its budget (docs/logs-analyzer.md#cost).
 */
export class LogAnalysisService {
  constructor(
    private readonly repos: Pick<Repositories, 'projects'>,
    private readonly logs: Pick<LogStore, 'tail'>,
    private readonly env: Pick<EnvService, 'secretValues'>,
    private readonly llm: LlmAnalyzer | undefined,
    private readonly pool: AnalysisPool,
  ) {}

  /** Stops the pool's workers (the app closes it). */
  close(): Promise<void> {
    return this.pool.close();
  }

  async analyze(access: Access, projectSlug: ProjectRef, logs: string | undefined): Promise<Analysis> {
    const project = await resolveProject(this.repos, access, projectSlug);
    if (logs !== undefined && Buffer.byteLength(logs, 'utf8') > MAX_ANALYZE_BYTES) {
      throw invalid(`"logs" must be at most ${String(MAX_ANALYZE_BYTES)} bytes (1 MiB) of text.`);
    }
    const text = logs !== undefined && logs !== '' ? logs : (await this.logs.tail(project.id, RECENT_LINES)).map((line) => line.message);
    if (this.llm === undefined) return this.pool.analyze(text);
    return this.llm.answer(await this.pool.prepare(text, await this.env.secretValues(project.id)));
  }
}
