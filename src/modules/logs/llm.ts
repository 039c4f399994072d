// Log analysis by a language model behind an OpenAI-compatible chat-completions endpoint
// (docs/logs-analyzer.md#llm). The model sees the built-in analyzer's templates and issues,
// redacted, never the log lines; whatever goes wrong, the built-in answer stands.
import { inspect, severityRank, type Analysis, type BuiltinAnalysis, type Inspection } from './analyzer.js';
import { levelRank, type LogLevel } from './lines.js';
import { redact } from './redact.js';
import { SEVERITIES, type Issue, type Severity } from './signatures.js';

export { redact, REDACTED } from './redact.js';

export interface LlmOptions {
  /** the API's base address, e.g. `https://api.openai.com/v1`; requests go to `<baseUrl>/chat/completions` */
  baseUrl: string;
  model: string;
  /** sent as `Authorization: Bearer …`; never logged, never put in a message */
  apiKey?: string | undefined;
  /** the whole exchange, answer included; default 20 s */
  timeoutMs?: number | undefined;
  fetch?: typeof fetch | undefined;
  /** told why the built-in answer was used; the reason never holds the key, the logs or the model's text */
  onFallback?: ((reason: string) => void) | undefined;
}

export interface LlmAnalyzeOptions {
  /** values of the project's secret variables: removed from everything sent */
  secrets?: readonly string[] | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * What the model is asked with, made from the logs without I/O (templates mined, secrets
 * redacted): the analysis worker prepares it off the event loop (src/modules/logs/analysis-pool.ts).
 */
export interface Prepared {
  builtin: BuiltinAnalysis;
  lineCount: number;
  payload: LlmPayload;
  /** pattern or masked example as sent → a real line of the logs */
  examples: [string, string][];
}

/** The built-in analysis and the model's request, for `secrets` removed. */
export function prepare(logs: string | readonly string[], secrets: readonly string[]): Prepared {
  const inspection = inspect(logs);
  if (inspection.lineCount === 0) return { builtin: inspection.analysis, lineCount: 0, payload: { lines: 0, templates: [], builtin_issues: [] }, examples: [] };
  const { payload, examples } = buildPayload(inspection, secrets);
  return { builtin: inspection.analysis, lineCount: inspection.lineCount, payload, examples: [...examples] };
}

/** What the model receives, as JSON in the user message. */
export interface LlmPayload {
  lines: number;
  templates: { pattern: string; count: number; level: LogLevel | null }[];
  builtin_issues: Issue[];
}

const MAX_TEMPLATES = 200;
const MAX_PATTERN = 500;
/** characters of JSON for the templates, so a log of many distinct lines stays one modest request */
const TEMPLATE_BUDGET = 60_000;
const MAX_ANSWER = 1024 * 1024;
const MAX_ISSUES = 50;

const SYSTEM_PROMPT = [
  'You analyse the logs of an application deployed on Slipway, a self-hosted deployment platform.',
  'You receive JSON: the number of log lines; the lines grouped into templates (variable parts replaced by <*>, secrets by [REDACTED]) with how many lines each covers and the level they were logged at; and the issues Slipway\'s built-in analyzer found.',
  'Answer with one JSON object and nothing else: {"summary": string, "issues": [{"pattern": string, "count": integer, "severity": "critical" | "error" | "warning", "example": string, "hint": string}]}.',
  'List the problems that matter, most severe first. "pattern" names the problem; "count" is how many lines show it; "example" is the pattern of the template that shows it best, copied exactly; "hint" is one sentence telling the developer what to change.',
  '"summary" is one or two sentences on the state of the application. Never invent secrets or values that are not in the input.',
].join(' ');

class Fallback extends Error {}

/** Asks a language model about logs; falls back to the built-in analysis on any failure. */
export class LlmAnalyzer {
  private readonly url: string;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(private readonly opts: LlmOptions) {
    this.url = `${opts.baseUrl.replace(/\/+$/, '')}/chat/completions`;
    this.timeoutMs = opts.timeoutMs ?? 20_000;
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  /** The `analyzer` of the model's answers. */
  get name(): string {
    return `llm:${this.opts.model}`;
  }

  async analyze(logs: string | readonly string[], options: LlmAnalyzeOptions = {}): Promise<Analysis> {
    return this.answer(prepare(logs, options.secrets ?? []), options);
  }

  /** The model's analysis of a prepared request (its secrets already removed), or the built-in analysis. */
  async answer(prepared: Prepared, options: Pick<LlmAnalyzeOptions, 'signal'> = {}): Promise<Analysis> {
    const builtin: BuiltinAnalysis = prepared.builtin;
    if (prepared.lineCount === 0) return builtin;
    const examples = new Map(prepared.examples);
    try {
      const content = await this.complete(JSON.stringify(prepared.payload), options.signal);
      const answer = parseAnswer(content);
      const issues = answer.issues
        .map((issue) => ({ ...issue, example: examples.get(issue.example) ?? issue.example }))
        .sort((a, b) => severityRank(a.severity) - severityRank(b.severity) || b.count - a.count);
      return { summary: answer.summary, issues, analyzer: this.name };
    } catch (err) {
      this.opts.onFallback?.(err instanceof Fallback ? err.message : 'the analysis failed unexpectedly');
      return builtin;
    }
  }

  private async complete(userContent: string, signal: AbortSignal | undefined): Promise<string> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.opts.apiKey !== undefined && this.opts.apiKey !== '') headers['authorization'] = `Bearer ${this.opts.apiKey}`;
    let text: string;
    let status: number;
    try {
      const res = await this.fetch(this.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          model: this.opts.model,
          temperature: 0,
          response_format: { type: 'json_object' },
          messages: [
            { role: 'system', content: SYSTEM_PROMPT },
            { role: 'user', content: userContent },
          ],
        }),
        signal: signal === undefined ? timeout : AbortSignal.any([timeout, signal]),
      });
      status = res.status;
      text = await res.text();
    } catch {
      throw new Fallback(timeout.aborted ? `no answer within ${String(this.timeoutMs / 1000)} s` : 'the endpoint could not be reached');
    }
    if (status < 200 || status > 299) throw new Fallback(`the endpoint answered HTTP ${String(status)}`);
    if (text.length > MAX_ANSWER) throw new Fallback('the answer was too large');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Fallback('the answer was not JSON');
    }
    const choices = field(body, 'choices');
    const message = Array.isArray(choices) ? field(choices[0], 'message') : undefined;
    const content = field(message, 'content');
    if (typeof content !== 'string') throw new Fallback('the answer carried no message content');
    return content;
  }
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>)[name] : undefined;
}

/**
 * The request's content: templates (the most severe and most frequent first, within a budget)
 * and the built-in issues, each example replaced by its line's template, all redacted. `examples` maps a
 * pattern or masked example as sent back to a real line of the logs, so that an answer quoting
 * one shows the user that line.
 */
export function buildPayload(inspection: Inspection, secrets: readonly string[]): { payload: LlmPayload; examples: Map<string, string> } {
  const examples = new Map<string, string>();
  const clean = (text: string): string => redact(text.length > MAX_PATTERN ? `${text.slice(0, MAX_PATTERN - 1)}…` : text, secrets);
  const templates: LlmPayload['templates'] = [];
  let used = 0;
  const ordered = [...inspection.templates].sort((a, b) => levelRank(a.level) - levelRank(b.level) || b.count - a.count || a.id - b.id);
  for (const t of ordered.slice(0, MAX_TEMPLATES)) {
    const pattern = clean(t.pattern);
    used += pattern.length + 40;
    if (used > TEMPLATE_BUDGET) break;
    templates.push({ pattern, count: t.count, level: t.level });
    if (!examples.has(pattern)) examples.set(pattern, t.example);
  }
  const builtin_issues = inspection.analysis.issues.map((i, n) => {
    const example = clean(inspection.exampleTemplates[n] ?? '');
    if (!examples.has(example)) examples.set(example, i.example);
    return { pattern: clean(i.pattern), count: i.count, severity: i.severity, example, hint: clean(i.hint) };
  });
  return { payload: { lines: inspection.lineCount, templates, builtin_issues }, examples };
}

function text(value: unknown, name: string, max: number, allowEmpty = false): string {
  if (typeof value !== 'string' || (!allowEmpty && value.trim() === '') || value.length > max) throw new Fallback(`the answer's ${name} was not a string of at most ${String(max)} characters`);
  return value;
}

/**
 * Some models fence their JSON even when asked for an object: the text between a first line of
 * ```` ``` ```` or ```` ```json ```` and a last line of ```` ``` ````. Cut by index, not by a pattern
 * whose lazy middle and white-space runs are quadratic in an answer of blank lines.
 */
function unfence(content: string): string {
  const text = content.trim();
  if (!text.startsWith('```') || !text.endsWith('```') || text.length < 6) return content;
  const firstBreak = text.indexOf('\n');
  const lastBreak = text.lastIndexOf('\n');
  if (firstBreak === -1 || lastBreak <= firstBreak) return content;
  const opening = text.slice(3, firstBreak).trim();
  if (opening !== '' && opening !== 'json') return content;
  if (text.slice(lastBreak + 1).trim() !== '```') return content;
  return text.slice(firstBreak + 1, lastBreak);
}

/** The model's content as an analysis: the shape is checked field by field, and nothing else is taken. */
export function parseAnswer(content: string): { summary: string; issues: Issue[] } {
  const unfenced = unfence(content);
  let value: unknown;
  try {
    value = JSON.parse(unfenced);
  } catch {
    throw new Fallback("the model's content was not JSON");
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Fallback("the model's content was not a JSON object");
  const summary = text(field(value, 'summary'), 'summary', 2000);
  const list = field(value, 'issues');
  if (!Array.isArray(list) || list.length > MAX_ISSUES) throw new Fallback(`the answer's issues were not a list of at most ${String(MAX_ISSUES)}`);
  const issues = (list as unknown[]).map((item, n): Issue => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) throw new Fallback(`the answer's issues[${String(n)}] was not an object`);
    const count = field(item, 'count');
    if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) throw new Fallback(`the answer's issues[${String(n)}].count was not a whole number`);
    const severity = field(item, 'severity');
    if (typeof severity !== 'string' || !(SEVERITIES as readonly string[]).includes(severity)) throw new Fallback(`the answer's issues[${String(n)}].severity was not critical, error or warning`);
    return {
      pattern: text(field(item, 'pattern'), `issues[${String(n)}].pattern`, 1000),
      count,
      severity: severity as Severity,
      example: text(field(item, 'example'), `issues[${String(n)}].example`, 2000, true),
      hint: text(field(item, 'hint'), `issues[${String(n)}].hint`, 1000),
    };
  });
  return { summary, issues };
}
