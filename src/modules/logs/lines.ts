// One log line as the analyzer reads it: the text a person would read (a JSON or logfmt line's
// message, a line without its timestamp or Compose prefix) and the level it was logged at.

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug';

export interface LogLine {
  /** the line as given */
  raw: string;
  /** the message: a structured line's `msg`, otherwise the line without its leading timestamp */
  text: string;
  /** null when nothing on the line names a level */
  level: LogLevel | null;
}

/** Most severe first; the analyzer ranks by this order. */
export const LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug'];

export const levelRank = (level: LogLevel | null): number => (level === null ? LEVELS.length : LEVELS.indexOf(level));

/** Splits a text into lines; a trailing newline does not make an empty last line. */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

const LEVEL_WORDS: Readonly<Record<string, LogLevel>> = {
  fatal: 'fatal',
  panic: 'fatal',
  crit: 'fatal',
  critical: 'fatal',
  emerg: 'fatal',
  emergency: 'fatal',
  alert: 'fatal',
  error: 'error',
  err: 'error',
  eror: 'error',
  warn: 'warn',
  warning: 'warn',
  info: 'info',
  notice: 'info',
  information: 'info',
  debug: 'debug',
  trace: 'debug',
  dbug: 'debug',
};

/** A level's name or number (pino, bunyan) as one of LEVELS; null when it names none. */
function levelWord(value: unknown): LogLevel | null {
  if (typeof value === 'number') {
    // pino and bunyan: 10 trace … 60 fatal
    if (value >= 60) return 'fatal';
    if (value >= 50) return 'error';
    if (value >= 40) return 'warn';
    if (value >= 30) return 'info';
    return 'debug';
  }
  if (typeof value !== 'string') return null;
  return LEVEL_WORDS[value.toLowerCase()] ?? null;
}

// A leading ISO 8601 or syslog timestamp, and Docker Compose's `service-1  | `.
const PREFIX = /^(?:\S+\s+\|\s?)?(?:\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z| ?[+-]\d{2}:?\d{2})?\]?\s+|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}\s+)/;

// A level word standing alone near the start of a line: `ERROR`, `[error]`, `level=error`,
// Python logging's `ERROR:root:`, Rails' `E, [` (not handled: too short to be sure).
const TEXT_LEVEL = /(?:^|[\s[(|])(FATAL|PANIC|CRIT(?:ICAL)?|EMERG(?:ENCY)?|ERROR|ERR|WARN(?:ING)?|INFO|NOTICE|DEBUG|TRACE)(?=$|[\s\]):|,!])/;
const BRACKET_LEVEL = /\[(fatal|panic|crit|critical|emerg|error|err|warn|warning|info|notice|debug|trace)\]/i;
const LOGFMT_LEVEL = /(?:^|\s)(?:level|lvl|severity)=["']?([A-Za-z]+)/;
const LOGFMT_MSG = /(?:^|\s)(?:msg|message)=("(?:[^"\\]|\\.)*"|\S+)/;
// Lines that say an error happened without a level word: a stack trace's header, a panic.
const ERROR_SHAPED = /^(?:panic: |fatal error: |Traceback \(most recent call last\)|Exception in thread |Uncaught |(?:[\w$.]+\.)?(?:[A-Z]\w*)?(?:Error|Exception)(?: \[\w+\])?: )/;

function jsonLine(raw: string): LogLine | null {
  const trimmed = raw.trim();
  if (!trimmed.startsWith('{') || !trimmed.endsWith('}')) return null;
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const obj = value as Record<string, unknown>;
  const level = levelWord(obj['level'] ?? obj['severity'] ?? obj['lvl'] ?? obj['log.level']);
  const msg = obj['msg'] ?? obj['message'] ?? obj['error'];
  const err = obj['err'];
  let text = typeof msg === 'string' ? msg : trimmed;
  // pino puts an error's message in err.message and its own msg may just repeat it
  if (typeof err === 'object' && err !== null && typeof (err as Record<string, unknown>)['message'] === 'string') {
    const errMessage = (err as Record<string, unknown>)['message'] as string;
    if (!text.includes(errMessage)) text = `${text}: ${errMessage}`;
  }
  return { raw, text, level };
}

function unquote(value: string): string {
  if (!value.startsWith('"')) return value;
  try {
    const parsed: unknown = JSON.parse(value);
    return typeof parsed === 'string' ? parsed : value;
  } catch {
    return value.slice(1, -1);
  }
}

/** The level a JSON or logfmt line states, or null: what collection stores with the line (no guessing from words). */
export function statedLevel(raw: string): LogLevel | null {
  const json = jsonLine(raw);
  if (json !== null) return json.level;
  const m = LOGFMT_LEVEL.exec(raw);
  return m?.[1] === undefined ? null : levelWord(m[1]);
}

/** Reads one line: its message and its level. */
export function parseLine(raw: string): LogLine {
  const json = jsonLine(raw);
  if (json !== null) return json;
  const logfmtLevel = LOGFMT_LEVEL.exec(raw);
  if (logfmtLevel !== null) {
    const msg = LOGFMT_MSG.exec(raw);
    return { raw, text: msg?.[1] === undefined ? raw.trim() : unquote(msg[1]), level: levelWord(logfmtLevel[1]) };
  }
  const text = raw.replace(PREFIX, '');
  const head = text.slice(0, 80);
  const word = TEXT_LEVEL.exec(head)?.[1] ?? BRACKET_LEVEL.exec(head)?.[1];
  let level = word === undefined ? null : levelWord(word);
  if (level === null && ERROR_SHAPED.test(text)) level = /^(?:panic|fatal error): /.test(text) ? 'fatal' : 'error';
  return { raw, text, level };
}
