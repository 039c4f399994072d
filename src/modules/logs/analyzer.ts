// The built-in log analyzer: known failure signatures first, then the error templates nobody
// explained, ranked by how often they occur. A pure function of the lines.
import { parseLine, splitLines, type LogLine } from './lines.js';
import { clip, recognize, SEVERITIES, type Issue, type Severity } from './signatures.js';
import { TemplateMiner, WILDCARD, type Template } from './templates.js';

export type { Issue, Severity } from './signatures.js';
export type { Template } from './templates.js';

export interface Analysis {
  summary: string;
  issues: Issue[];
  /** `builtin`, or `llm:<model>` when a language model answered (docs/logs-analyzer.md) */
  analyzer: string;
}

export interface BuiltinAnalysis extends Analysis {
  analyzer: 'builtin';
}

/** The analysis with what it was made from: the LLM pass sends the templates, never the lines. */
export interface Inspection {
  analysis: BuiltinAnalysis;
  templates: Template[];
  lineCount: number;
  /** for each issue, the pattern of its example line's template: the example as the LLM pass may show it */
  exampleTemplates: string[];
}

/** Anonymous error templates reported at most; the named signatures are always all reported. */
const MAX_TEMPLATE_ISSUES = 10;
const MAX_WARNING_ISSUES = 5;
/** issues in one answer, the most severe and frequent first */
const MAX_ISSUES = 50;
/**
 * Longer lines are read up to here, by every pattern and in every example: enough for any
 * message, and no regular expression sees a megabyte (docs/logs-analyzer.md#cost).
 */
export const MAX_LINE = 8192;
const MAX_PATTERN = 300;
const MAX_EXAMPLE = 1000;

export const severityRank = (s: Severity): number => SEVERITIES.indexOf(s);

const toLines = (input: string | readonly string[]): readonly string[] => (typeof input === 'string' ? splitLines(input) : input);

/** Analyses log text (or its lines) without any I/O. */
export function analyze(input: string | readonly string[]): BuiltinAnalysis {
  return inspect(input).analysis;
}

export function inspect(input: string | readonly string[]): Inspection {
  const raw = toLines(input);
  const lines: LogLine[] = raw.map((r) => parseLine(r.length > MAX_LINE ? r.slice(0, MAX_LINE) : r));
  const miner = new TemplateMiner();
  lines.forEach((l, i) => {
    miner.add(l, i);
  });
  const templates = miner.templates();
  const templateOf = new Map<number, number>();
  for (const t of templates) for (const i of t.lines) templateOf.set(i, t.id);
  const byId = new Map(templates.map((t) => [t.id, t]));
  const patternAt = (i: number): string => byId.get(templateOf.get(i) ?? -1)?.pattern ?? '';

  const signatures = recognize(lines, (i) => templateOf.get(i));
  const ranked: { issue: Issue; first: number; template: string }[] = signatures.findings.map((f) => ({
    issue: { pattern: f.pattern, count: f.count, severity: f.severity, example: f.example, hint: f.hint },
    first: f.first,
    template: patternAt(f.first),
  }));
  // Lines inside a trace are its frames, not errors of their own.
  const inTrace = new Set<number>();
  for (const t of signatures.traces) for (let k = t.start; k <= t.end; k++) inTrace.add(k);
  const unexplained = (i: number): boolean => !signatures.claimed.has(i) && !inTrace.has(i);

  let errors = 0;
  let warnings = 0;
  for (const t of templates) {
    const left = t.lines.filter((i) => unexplained(i) && lines[i]?.level !== null);
    const at = (levels: readonly string[]) => left.filter((i) => levels.includes(lines[i]?.level ?? ''));
    const serious = at(['fatal', 'error']);
    if (serious.length > 0 && errors < MAX_TEMPLATE_ISSUES) {
      errors++;
      ranked.push({ issue: templateIssue(t, serious, lines, at(['fatal']).length > 0 ? 'critical' : 'error'), first: serious[0] ?? 0, template: t.pattern });
      continue;
    }
    const warned = at(['warn']);
    if (serious.length === 0 && warned.length > 0 && warnings < MAX_WARNING_ISSUES) {
      warnings++;
      ranked.push({ issue: templateIssue(t, warned, lines, 'warning'), first: warned[0] ?? 0, template: t.pattern });
    }
  }
  ranked.sort((a, b) => severityRank(a.issue.severity) - severityRank(b.issue.severity) || b.issue.count - a.issue.count || a.first - b.first);
  ranked.splice(MAX_ISSUES);
  const issues = ranked.map((r) => r.issue);
  return {
    analysis: { summary: summarize(issues, lines.length), issues, analyzer: 'builtin' },
    templates,
    lineCount: lines.length,
    exampleTemplates: ranked.map((r) => r.template),
  };
}

function templateIssue(t: Template, indices: readonly number[], lines: readonly LogLine[], severity: Severity): Issue {
  const example = lines[indices[0] ?? 0]?.raw ?? t.example;
  // the longest run of fixed words in the template is the text to search the app's code for
  let words: string[] = [];
  let run: string[] = [];
  for (const token of t.pattern.split(' ')) {
    if (token.includes(WILDCARD)) run = [];
    else if (run.push(token) > words.length) words = [...run];
  }
  words = words.slice(0, 8);
  const quote = words.length >= 2 ? `"${words.join(' ')}"` : 'this message';
  const times = indices.length === 1 ? 'once' : `${formatCount(indices.length)} times`;
  return {
    pattern: clip(t.pattern, MAX_PATTERN),
    count: indices.length,
    severity,
    example: clip(example, MAX_EXAMPLE),
    hint: `Slipway has no rule for this ${severity === 'warning' ? 'warning' : 'error'}, logged ${times}: find where the app logs ${quote} and fix its cause.`,
  };
}

/** 1204 → "1,204", the same on every machine. */
export const formatCount = (n: number): string => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

export function summarize(issues: readonly Issue[], lineCount: number): string {
  if (lineCount === 0) return 'No log lines to analyze, so nothing was found.';
  const lines = `${formatCount(lineCount)} line${lineCount === 1 ? '' : 's'}`;
  if (issues.length === 0) return `No problems found in ${lines}.`;
  const top = issues.slice(0, 3).map((i) => `${clip(i.pattern, 120)} (${formatCount(i.count)}×)`);
  const more = issues.length > 3 ? `; and ${formatCount(issues.length - 3)} more` : '';
  return `${formatCount(issues.length)} issue${issues.length === 1 ? '' : 's'} in ${lines}: ${top.join('; ')}${more}.`;
}
