// Groups log lines into templates, the way Drain does (He et al., "Drain: An Online Log Parsing
// Approach with Fixed Depth Tree", ICWS 2017): variable-looking tokens are masked, a line goes
// down a tree by its token count and its first tokens, and joins the most similar template in
// that leaf (or starts one); where the line and the template differ, the template gets `<*>`.
import { levelRank, parseLine, type LogLevel, type LogLine } from './lines.js';

export const WILDCARD = '<*>';

export interface Template {
  /** order of first appearance, from 0 */
  id: number;
  /** the tokens joined by single spaces, `<*>` where lines differ or hold a variable */
  pattern: string;
  count: number;
  /** the first line of the template, as given */
  example: string;
  /** indices of its lines in the input, ascending */
  lines: number[];
  /** how many of its lines were logged at each level */
  levels: Partial<Record<LogLevel, number>>;
  /** the most severe level among its lines, null when none named one */
  level: LogLevel | null;
}

export interface MinerOptions {
  /** share of positions that must hold the same token for a line to join a template (0..1], default 0.5 */
  similarity?: number | undefined;
  /** how many leading tokens choose the leaf, default 2 */
  depth?: number | undefined;
  /** children per tree node before further tokens share the `<*>` child, default 100 */
  maxChildren?: number | undefined;
  /** tokens considered per line; the rest is cut off as one `<*>`, default 64 */
  maxTokens?: number | undefined;
  /**
   * templates compared per leaf, default 256: beyond it a new line only joins a template it
   * equals, so that 20,000 unlike lines cost 20,000 × 256 comparisons at most, not 20,000².
   */
  maxLeafTemplates?: number | undefined;
}

/**
 * Longer tokens are one `<*>` whole: a word of a message is never this long, and no pattern
 * below sees more than this many characters of one token (issue 26: a token of 8,190 commas).
 */
export const MAX_TOKEN = 128;

// Whole-line masks, applied before splitting: values that may contain spaces. Each is linear in
// the line: fixed-width fields, or one run the pattern cannot re-enter (docs/logs-analyzer.md#cost).
const LINE_MASKS: readonly RegExp[] = [
  // ISO 8601 and `2024-01-02 03:04:05,678`
  /\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z| ?[+-]\d{2}:?\d{2})?/g,
  // syslog's `Nov 23 22:05:34`
  /\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{2}:\d{2}:\d{2}\b/g,
];

/** Characters a quoted value may hold, at most. */
const MAX_QUOTED = 500;
type Quote = '"' | "'" | '`';
const isQuote = (c: string): c is Quote => c === '"' || c === "'" || c === '`';
// what a regular expression's `.` does not match
const isLineTerminator = (c: string | undefined): boolean => c === undefined || c === '\n' || c === '\r' || c === '\u2028' || c === '\u2029';

/**
 * The index of the quote closing the value opened at `open`, or, as `-1 - i`, the index `i` where
 * the value could no longer go on. `"…"` may hold backslash escapes; none holds a newline or more
 * than MAX_QUOTED characters (an escape counts as one).
 */
function closingQuote(text: string, open: number, quote: Quote): number {
  let i = open + 1;
  for (let held = 0; i < text.length; held++) {
    const c = text[i];
    if (c === quote) return i;
    if (held === MAX_QUOTED || c === '\n') break;
    if (quote === '"' && c === '\\') {
      if (isLineTerminator(text[i + 1])) break;
      i += 2;
    } else i++;
  }
  return -1 - i;
}

/**
 * Quoted values as `<*>`, scanned once: after a quote that closes nowhere, the next opening quote
 * of its kind is looked for past where that scan stopped, so no character is read again and again
 * (a regular expression restarts at every escaped `\"` inside, which is quadratic).
 */
function maskQuoted(text: string): string {
  if (!/["'`]/.test(text)) return text;
  const blocked: Record<Quote, number> = { '"': 0, "'": 0, '`': 0 };
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (!isQuote(c) || i < blocked[c]) continue;
    const close = closingQuote(text, i, c);
    if (close < 0) {
      blocked[c] = -1 - close;
      continue;
    }
    out += `${text.slice(from, i)}${WILDCARD}`;
    from = close + 1;
    i = close;
  }
  return from === 0 ? text : out + text.slice(from);
}

// A token whose core (without surrounding brackets and punctuation) matches one of these is a
// variable. Anchored, at most MAX_TOKEN characters, and without two quantifiers that can share a
// character, so each is linear in the token.
const TOKEN_MASKS: readonly RegExp[] = [
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  // IPv4 with an optional port, IPv6 (at least two colons; a port only after `]`)
  /^(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?$/,
  /^\[?[0-9a-f]*:[0-9a-f]*:[0-9a-f:]*(?:\](?::\d+)?)?$/i,
  // 0x…, and hex runs of 8 or more holding a digit (ids, hashes, container ids)
  /^0x[0-9a-f]+$/i,
  /^(?=[0-9a-f]*\d)[0-9a-f]{8,}$/i,
  // clock times, numbers, durations like 12ms, sizes like 3.5MB
  /^\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?$/,
  /^[-+]?\d+(?:[.,]\d+)*(?:[a-zA-Z%µ]{1,3})?$/,
  // paths and URLs holding a digit
  /^(?:[a-z][a-z0-9+.-]*:\/\/|\/|\.\.?\/)\S*\d\S*$/i,
];
const LEADING = new Set('([{<"\'`');
const TRAILING = new Set(')]}>"\'`,.;:!?');

// Inside other tokens, numbers that do not follow a letter (`user=42`, `App.java:5`, but not `sha256`).
const INNER_NUMBER = /(?<![A-Za-z_\d])\d+(?:\.\d+)*/g;

/**
 * A token with its core masked. The leading brackets and trailing punctuation are found by
 * scanning from each end (a pattern with a lazy middle was quadratic in the token's length).
 */
function maskToken(token: string): string {
  if (token.length > MAX_TOKEN) return WILDCARD;
  let start = 0;
  while (start < token.length && LEADING.has(token.charAt(start))) start++;
  let end = token.length;
  while (end > start && TRAILING.has(token.charAt(end - 1))) end--;
  const core = token.slice(start, end);
  if (core === '' || core === WILDCARD) return token;
  if (TOKEN_MASKS.some((m) => m.test(core))) return `${token.slice(0, start)}${WILDCARD}${token.slice(end)}`;
  return token.replace(INNER_NUMBER, WILDCARD);
}

/** The line's tokens with variables replaced by `<*>`. */
export function maskTokens(text: string, maxTokens = 64): string[] {
  let masked = text;
  for (const mask of LINE_MASKS) masked = masked.replace(mask, WILDCARD);
  masked = maskQuoted(masked);
  const tokens = masked.split(/\s+/).filter((t) => t !== '');
  const out: string[] = [];
  for (const token of tokens) {
    if (out.length === maxTokens) {
      out.push(WILDCARD);
      break;
    }
    out.push(maskToken(token));
  }
  return out;
}

interface Cluster {
  id: number;
  tokens: string[];
  count: number;
  example: string;
  lines: number[];
  levels: Partial<Record<LogLevel, number>>;
}

interface Node {
  children: Map<string, Node>;
  clusters: Cluster[];
  /** templates made after `clusters` was full, by their exact pattern */
  overflow: Map<string, Cluster>;
}

const newNode = (): Node => ({ children: new Map(), clusters: [], overflow: new Map() });
const hasDigit = (token: string): boolean => /\d/.test(token);

/** Mines templates from lines fed in order; the same lines in the same order give the same templates. */
export class TemplateMiner {
  private readonly similarity: number;
  private readonly depth: number;
  private readonly maxChildren: number;
  private readonly maxTokens: number;
  private readonly maxLeafTemplates: number;
  private readonly root = new Map<number, Node>();
  private readonly clusters: Cluster[] = [];

  constructor(opts: MinerOptions = {}) {
    this.similarity = opts.similarity ?? 0.5;
    this.depth = opts.depth ?? 2;
    this.maxChildren = opts.maxChildren ?? 100;
    this.maxTokens = opts.maxTokens ?? 64;
    this.maxLeafTemplates = opts.maxLeafTemplates ?? 256;
  }

  /** Adds the line at `index` of the input; blank lines belong to no template. */
  add(line: LogLine, index: number): void {
    const tokens = maskTokens(line.text, this.maxTokens);
    if (tokens.length === 0) return;
    const leaf = this.leaf(tokens);
    let best: Cluster | undefined;
    let bestScore = -1;
    for (const c of leaf.clusters) {
      const score = similarity(c.tokens, tokens);
      if (score > bestScore) {
        best = c;
        bestScore = score;
      }
    }
    let cluster: Cluster | undefined;
    if (best !== undefined && bestScore >= this.similarity) {
      cluster = best;
      for (let i = 0; i < tokens.length; i++) if (cluster.tokens[i] !== tokens[i]) cluster.tokens[i] = WILDCARD;
    } else if (leaf.clusters.length < this.maxLeafTemplates) {
      cluster = { id: this.clusters.length, tokens, count: 0, example: line.raw, lines: [], levels: {} };
      leaf.clusters.push(cluster);
      this.clusters.push(cluster);
    } else {
      const key = tokens.join(' ');
      cluster = leaf.overflow.get(key);
      if (cluster === undefined) {
        cluster = { id: this.clusters.length, tokens, count: 0, example: line.raw, lines: [], levels: {} };
        leaf.overflow.set(key, cluster);
        this.clusters.push(cluster);
      }
    }
    cluster.count++;
    cluster.lines.push(index);
    if (line.level !== null) cluster.levels[line.level] = (cluster.levels[line.level] ?? 0) + 1;
  }

  /** The templates, most lines first, then in order of first appearance. */
  templates(): Template[] {
    return this.clusters
      .map((c) => {
        let level: LogLevel | null = null;
        for (const l of Object.keys(c.levels) as LogLevel[]) if (levelRank(l) < levelRank(level)) level = l;
        return { id: c.id, pattern: c.tokens.join(' '), count: c.count, example: c.example, lines: [...c.lines], levels: { ...c.levels }, level };
      })
      .sort((a, b) => b.count - a.count || a.id - b.id);
  }

  private leaf(tokens: readonly string[]): Node {
    let node: Node | undefined = this.root.get(tokens.length);
    if (node === undefined) {
      node = newNode();
      this.root.set(tokens.length, node);
    }
    for (const token of tokens.slice(0, this.depth)) {
      const key = token === WILDCARD || hasDigit(token) ? WILDCARD : token;
      const full: boolean = node.children.size >= this.maxChildren;
      let next: Node | undefined = node.children.get(key) ?? (full ? node.children.get(WILDCARD) : undefined);
      if (next === undefined) {
        next = newNode();
        node.children.set(full ? WILDCARD : key, next);
      }
      node = next;
    }
    return node;
  }
}

/** Share of positions where template and line agree; a `<*>` in the template agrees only with `<*>`. */
function similarity(template: readonly string[], tokens: readonly string[]): number {
  let same = 0;
  for (let i = 0; i < tokens.length; i++) if (template[i] === tokens[i]) same++;
  return same / tokens.length;
}

/** Parses and mines `lines` in one go. */
export function mineTemplates(lines: readonly (string | LogLine)[], opts?: MinerOptions): Template[] {
  const miner = new TemplateMiner(opts);
  lines.forEach((line, i) => {
    miner.add(typeof line === 'string' ? parseLine(line) : line, i);
  });
  return miner.templates();
}
