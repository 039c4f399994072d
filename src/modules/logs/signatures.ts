// The failures Slipway recognises by name. Each recognizer reads the lines and reports issues that
// name what a person has to fix (the variable, the port, the address, the frame); the lines it
// explains are claimed, so the analyzer does not report them again as anonymous templates.
import type { LogLine } from './lines.js';
import { maskTokens } from './templates.js';

export type Severity = 'critical' | 'error' | 'warning';

export const SEVERITIES: readonly Severity[] = ['critical', 'error', 'warning'];

export interface Issue {
  pattern: string;
  count: number;
  severity: Severity;
  example: string;
  hint: string;
}

/** An issue with the input lines behind it. */
export interface Finding extends Issue {
  /** every line the issue explains, ascending */
  lines: number[];
  /** the line of its first occurrence */
  first: number;
}

/** A stack trace or panic found in the lines, whether or not it became an issue of its own. */
export interface Trace {
  start: number;
  header: number;
  end: number;
}

export interface SignatureResult {
  findings: Finding[];
  /** lines explained by a finding */
  claimed: Set<number>;
  traces: Trace[];
}

const MAX_EXAMPLE = 1000;
const MAX_DETAIL = 200;

export const clip = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

interface Entry {
  key: string;
  finding: Finding;
  lines: Set<number>;
}

/** Collects findings by key; an event counts once, a line is claimed once (by the first finding that explains it). */
class Findings {
  private readonly byKey = new Map<string, Entry>();
  private readonly owners = new Map<number, Entry>();
  readonly claimed = new Set<number>();

  constructor(private readonly lines: readonly LogLine[]) {}

  event(key: string, index: number, make: () => Omit<Issue, 'count' | 'example'>): Finding {
    let e = this.byKey.get(key);
    if (e === undefined) {
      e = { key, finding: { ...make(), count: 0, example: clip(this.lines[index]?.raw ?? '', MAX_EXAMPLE), lines: [], first: index }, lines: new Set() };
      this.byKey.set(key, e);
    }
    e.finding.count++;
    this.claimFor(e, index);
    return e.finding;
  }

  claim(key: string, index: number): void {
    const e = this.byKey.get(key);
    if (e !== undefined) this.claimFor(e, index);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /** The finding that claimed line `index` first, with its key. */
  owner(index: number): { key: string; finding: Finding } | undefined {
    const e = this.owners.get(index);
    return e === undefined ? undefined : { key: e.key, finding: e.finding };
  }

  all(): Finding[] {
    return [...this.byKey.values()].map((e) => ({ ...e.finding, lines: [...e.lines].sort((a, b) => a - b) }));
  }

  private claimFor(e: Entry, index: number): void {
    e.lines.add(index);
    this.claimed.add(index);
    if (!this.owners.has(index)) this.owners.set(index, e);
  }
}

// Node prints an error's properties after its stack (`  code: 'EADDRINUSE',`): part of the same event.
const ERROR_PROPERTY = /^\s+(?:code|errno|syscall|address|port|path|dest|hostname|host|info):\s/;

const LOCAL_HOSTS = /^(?:localhost|127\.\d+\.\d+\.\d+|\[?::1\]?|0\.0\.0\.0|\[?::\]?)$/i;

const TARGET_TRAILING = new Set('.,;)\'"]');
const TARGET_LEADING = new Set('(\'"[');

/**
 * `host:port` of a target written `host/ip:port` (Java), `[v6]:port` or `host:port`: trailing
 * punctuation goes, and leading brackets unless a `]` closes one. Index scans, not patterns
 * anchored at the end, which are quadratic in a run of punctuation.
 */
function target(text: string): string {
  let end = text.length;
  while (end > 0 && TARGET_TRAILING.has(text.charAt(end - 1))) end--;
  let start = 0;
  while (start < end && TARGET_LEADING.has(text.charAt(start))) start++;
  const t = text.slice(text.slice(start, end).includes(']') ? 0 : start, end);
  const java = /^([^/\s]+)\/[^:\s]*:(\d+)$/.exec(t);
  if (java?.[1] !== undefined && java[2] !== undefined) return `${java[1]}:${java[2]}`;
  return t;
}

function hostOf(t: string): string {
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(t);
  if (v6?.[1] !== undefined) return v6[1];
  const i = t.lastIndexOf(':');
  if (i > 0 && /^\d+$/.test(t.slice(i + 1)) && t.indexOf(':') === i) return t.slice(0, i);
  if (/^::1:\d+$/.test(t)) return '::1';
  return t;
}

// --- out of memory -------------------------------------------------------------------------

const KERNEL_OOM = /(?:Memory cgroup out of memory|Out of memory): Killed process (\d+) \(([^)]{0,256})\)/;
const KERNEL_OOM_OTHER = /\boom-kill:|invoked oom-killer|oom_reaper: reaped process|\boom_kill_process\b/;
const EXIT_137 = /\bOOMKilled\b|\bexit(?:ed)?(?: with)?(?: code| status)?[ :=]+137\b|\bcode[ =:]137\b/i;
const NODE_HEAP = /JavaScript heap out of memory/;
const NODE_HEAP_OTHER = /^FATAL ERROR: (?:Reached heap limit|CALL_AND_RETRY_LAST|Ineffective mark-compacts)|^<--- Last few GCs --->/;
const JAVA_OOM = /java\.lang\.OutOfMemoryError(?::\s*(.*))?/;
const OTHER_OOM = /^MemoryError\b|^fatal error: runtime: out of memory|\bCannot allocate memory\b/;

const RAM_HINT = "raise the project's ram, or make the app use less memory";

function outOfMemory(lines: readonly LogLine[], out: Findings): void {
  // the kernel's `Killed process` line names the kill best; without it, its `oom-kill:` line does
  const reports = lines.some((l) => KERNEL_OOM.test(l.raw));
  const kernel = reports || lines.some((l) => /\boom-kill:/.test(l.raw));
  // the rest of the kernel's report (`invoked oom-killer`, `oom_reaper`), and exit 137 seen from outside, is the same kill
  const around: number[] = [];
  lines.forEach((line, i) => {
    const raw = line.raw;
    if (!/oom|memory|137|heap|MemoryError|Killed/i.test(raw)) return;
    const killed = KERNEL_OOM.exec(raw);
    const oomKill = reports ? null : /\boom-kill:.{0,2000}\btask=([^,\s]+)/.exec(raw);
    if (killed !== null || oomKill !== null) {
      const name = killed?.[2] ?? oomKill?.[1] ?? '';
      out.event('oom:kernel', i, () => ({
        pattern: 'OOM kill: the kernel killed a process for lack of memory',
        severity: 'critical',
        hint: `The container ran out of memory and the kernel killed ${name === '' ? 'the app' : name}: ${RAM_HINT} (fewer workers, a smaller cache).`,
      }));
      return;
    }
    if (KERNEL_OOM_OTHER.test(raw) && kernel) {
      around.push(i);
      return;
    }
    if (EXIT_137.test(raw) || /^Killed$/.test(line.text.trim())) {
      if (kernel) around.push(i);
      else {
        out.event('oom:137', i, () => ({
          pattern: 'OOM kill: the app was killed (exit code 137)',
          severity: 'critical',
          hint: `The process got SIGKILL (exit code 137), almost always for using more memory than the container may: ${RAM_HINT}.`,
        }));
      }
      return;
    }
    if (NODE_HEAP.test(raw)) {
      out.event('oom:node', i, () => ({
        pattern: 'Out of memory: JavaScript heap out of memory',
        severity: 'critical',
        hint: "Node.js reached its heap limit: raise the project's ram and set NODE_OPTIONS=--max-old-space-size to about three quarters of it in MiB, or find what keeps growing in memory.",
      }));
      return;
    }
    if (NODE_HEAP_OTHER.test(line.text) && out.has('oom:node')) {
      out.claim('oom:node', i);
      return;
    }
    const java = JAVA_OOM.exec(raw);
    if (java !== null) {
      const what = (java[1] ?? '').trim();
      out.event(`oom:java:${what}`, i, () => ({
        pattern: `Out of memory: java.lang.OutOfMemoryError${what === '' ? '' : `: ${clip(what, MAX_DETAIL)}`}`,
        severity: 'critical',
        hint: "The JVM ran out of memory: raise the project's ram and let the heap follow it (JAVA_TOOL_OPTIONS=-XX:MaxRAMPercentage=75), or find what keeps growing in memory.",
      }));
      return;
    }
    if (OTHER_OOM.test(line.text)) {
      out.event('oom:other', i, () => ({
        pattern: 'Out of memory: the app could not allocate memory',
        severity: 'critical',
        hint: `The app ran out of memory: ${RAM_HINT}.`,
      }));
    }
  });
  for (const i of around) out.claim('oom:kernel', i);
}

// --- port already in use --------------------------------------------------------------------

const IN_USE = /EADDRINUSE|address already in use|Address in use|Connection in use|Port \d+ (?:was|is) already in use|BindException/i;

function portOf(raw: string): string | undefined {
  const named = /\bport (\d{1,5})\b/i.exec(raw) ?? /\('[^']*', (\d{1,5})\)/.exec(raw);
  if (named?.[1] !== undefined) return named[1];
  const at = raw.search(/EADDRINUSE|listen (?:tcp|udp)|bind\(\) to|bind on|in use/i);
  const tail = at === -1 ? raw : raw.slice(at);
  return /:(\d{1,5})(?!\d|:\d|\.\d)/.exec(tail)?.[1];
}

function portInUse(lines: readonly LogLine[], out: Findings): void {
  lines.forEach((line, i) => {
    if (!IN_USE.test(line.raw) || ERROR_PROPERTY.test(line.text)) return;
    if (/BindException/.test(line.raw) && !/in use/i.test(line.raw)) return;
    const port = portOf(line.raw);
    out.event(`port:${port ?? '?'}`, i, () =>
      port === undefined
        ? {
            pattern: 'Address already in use',
            severity: 'critical',
            hint: 'The port the app binds is already taken inside the container: start its server only once, listening on the PORT variable Slipway sets.',
          }
        : {
            pattern: `Port ${port} already in use`,
            severity: 'critical',
            hint: `Port ${port} is already taken inside the container: start the app's server only once, listening on the PORT variable Slipway sets (the project's port).`,
          },
    );
  });
}

// --- missing environment variable -----------------------------------------------------------

const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;
const looksLikeEnv = (name: string): boolean => ENV_NAME.test(name) && (name.includes('_') || name.length >= 3);

// "DATABASE_URL is not set", "DATABASE_URL must be set"
const BARE_NAME = /\b([A-Z][A-Z0-9_]*)["'`]?\s+(?:environment variable\s+)?(?:is not set|is not defined|is undefined|must be set|must be defined|must be provided|is required|is missing|not set|not defined)\b/;

const ENV_LINE: readonly RegExp[] = [
  // "Missing required environment variable DATABASE_URL", "Required env var: DATABASE_URL"
  /\b(?:missing|undefined|unset|required|not set|no)\b[^\n]{0,30}?\b(?:env(?:ironment)?(?:[ _-]?var(?:iable)?)?s?|config(?:uration)? var(?:iable)?)\b[\s:=]*["'`]?([A-Za-z_][A-Za-z0-9_]*)/i,
  // "environment variable DATABASE_URL is not set"
  /\b(?:env(?:ironment)?(?:[ _-]?var(?:iable)?)?|variable)\s+["'`]?([A-Za-z_][A-Za-z0-9_]*)["'`]?\s+(?:is\s+)?(?:not set|not defined|undefined|missing|required|empty|must be (?:set|defined|provided))/i,
  BARE_NAME,
  /process\.env\.([A-Za-z_]\w*)\s+(?:is\s+)?(?:undefined|not set|missing|required|empty)/,
  // Go's envconfig, Ruby's ENV.fetch, Spring's placeholders
  /required key ([A-Za-z_][A-Za-z0-9_]*) missing value/,
  // Prisma, Django
  /Environment variable not found:\s*([A-Za-z_][A-Za-z0-9_]*)/i,
  /Set the ([A-Za-z_][A-Za-z0-9_]*) environment variable/,
  /key not found: "([A-Za-z_][A-Za-z0-9_]*)"/,
  /Could not resolve placeholder '([A-Za-z_][A-Za-z0-9_]*)'/,
];
const ENV_BLOCK = /(?:Missing|Invalid) environment variables?:?/i;
const ENV_KEYWORDS = /env|variable|required key|key not found|placeholder|KeyError|not set|must be|is required|is missing|not defined|validation error/i;
// pydantic-settings: `1 validation error for Settings`, then `database_url` and `  Field required [type=missing, …`
const PYDANTIC = /validation errors? for \w*Settings\b/;

function missingEnv(lines: readonly LogLine[], out: Findings): void {
  const report = (name: string, i: number): void => {
    out.event(`env:${name}`, i, () => ({
      pattern: `Missing environment variable ${name}`,
      severity: 'error',
      hint: `Set ${name} in the project's environment variables and redeploy.`,
    }));
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line === undefined || !ENV_KEYWORDS.test(line.raw)) continue;
    // envalid and zod list the variables in one block: `    DATABASE_URL: undefined`, `{ DATABASE_URL: [ 'Required' ] }`
    if (ENV_BLOCK.test(line.raw)) {
      const names: string[] = [];
      const inline = [...line.raw.matchAll(/\b([A-Z][A-Z0-9_]+)\s*:\s*(?:\[\s*)?['"]?(?:Required|undefined|missing|Invalid)/g)].map((m) => m[1] ?? '');
      names.push(...inline.filter(looksLikeEnv));
      let j = i + 1;
      for (; j < lines.length && j <= i + 50; j++) {
        const m = /^\s+([A-Z][A-Z0-9_]+)\s*:/.exec(lines[j]?.raw ?? '') ?? /^\s*([A-Z][A-Z0-9_]+)\s*:\s*(?:\[\s*)?['"]?(?:Required|undefined|missing|Invalid)/.exec(lines[j]?.raw ?? '');
        if (m?.[1] === undefined || !looksLikeEnv(m[1])) break;
        names.push(m[1]);
      }
      if (names.length > 0) {
        for (const name of names) report(name, i);
        for (let k = i + 1; k < j; k++) for (const name of names) out.claim(`env:${name}`, k);
        i = j - 1;
        continue;
      }
    }
    if (PYDANTIC.test(line.raw)) {
      let j = i + 1;
      for (; j + 1 < lines.length && j <= i + 40; j += 2) {
        const field = /^([A-Za-z_][A-Za-z0-9_]*)$/.exec(lines[j]?.text.trim() ?? '')?.[1];
        if (field === undefined || !/^\s+Field required\b/.test(lines[j + 1]?.text ?? '')) break;
        const name = field.toUpperCase();
        report(name, i);
        out.claim(`env:${name}`, j);
        out.claim(`env:${name}`, j + 1);
      }
      if (j > i + 1) {
        i = j - 1;
        continue;
      }
    }
    // Python: KeyError: 'DATABASE_URL' raised by os.environ[...]
    const keyError = /^KeyError: '([A-Za-z_][A-Za-z0-9_]*)'/.exec(line.text);
    if (keyError?.[1] !== undefined) {
      const from = Math.max(0, i - 30);
      if (lines.slice(from, i).some((l) => /\benviron\b|getenv/.test(l.raw))) report(keyError[1], i);
      continue;
    }
    // `ReferenceError: FOO is not defined` is about code, not the environment
    const code = /ReferenceError|NameError/.test(line.raw);
    for (const re of ENV_LINE) {
      if (code && re === BARE_NAME) continue;
      const name = re.exec(line.raw)?.[1];
      if (name !== undefined && looksLikeEnv(name)) {
        report(name, i);
        break;
      }
    }
  }
}

// --- connection refused and DNS ------------------------------------------------------------

interface Located {
  key: string;
  /** the address, or undefined when the line does not say */
  where: string | undefined;
}

function refusedTarget(raw: string, next: readonly string[]): Located | undefined {
  let m = /ECONNREFUSED\s+(\S+)/.exec(raw);
  if (m?.[1] !== undefined) return { key: 'refused', where: target(m[1]) };
  m = /dial (?:tcp|udp)\S*\s+(\S+?):\s+connect: connection refused/.exec(raw);
  if (m?.[1] !== undefined) return { key: 'refused', where: target(m[1]) };
  m = /server at "([^"]+)"(?: \([^)]{0,256}\))?, port (\d+) failed:.{0,500}Connection refused/i.exec(raw);
  if (m?.[1] !== undefined && m[2] !== undefined) return { key: 'refused', where: `${m[1]}:${m[2]}` };
  m = /Error 111 connecting to (\S+?)\.?\s/.exec(`${raw} `);
  if (m?.[1] !== undefined) return { key: 'refused', where: target(m[1]) };
  m = /Failed to connect to (\S+) port (\d+)/.exec(raw);
  if (m?.[1] !== undefined && m[2] !== undefined && /refused/i.test(raw)) return { key: 'refused', where: `${m[1]}:${m[2]}` };
  if (!/ECONNREFUSED|connection refused/i.test(raw)) return undefined;
  m = /Connection refused(?: \(Connection refused\))?:\s+(\S+:\d+)/i.exec(raw);
  if (m?.[1] !== undefined) return { key: 'refused', where: target(m[1]) };
  // psycopg2's older message names the host and port on the lines after it
  const after = next.join('\n');
  const host = /host "([^"]+)"/.exec(after)?.[1];
  const port = /on port (\d+)/.exec(after)?.[1];
  if (host !== undefined && port !== undefined) return { key: 'refused', where: `${host}:${port}` };
  m = /(?:^|[\s(@])((?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+|\[[0-9a-f:]+\]):(\d{2,5})\b/i.exec(raw.slice(Math.max(0, raw.search(/refused/i) - 120), raw.search(/refused/i) + 200));
  if (m?.[1] !== undefined && m[2] !== undefined && !/^\d{1,2}$/.test(m[1])) return { key: 'refused', where: `${m[1]}:${m[2]}` };
  return { key: 'refused', where: undefined };
}

function dnsTarget(raw: string): Located | undefined {
  let m = /getaddrinfo (?:ENOTFOUND|EAI_AGAIN|EAI_NONAME|EAI_FAIL)\s+([^\s,;)'"]+)/.exec(raw);
  if (m?.[1] !== undefined) return { key: 'dns', where: m[1] };
  m = /lookup ([^\s:]+)(?: on [^\s]+)?: (?:no such host|server misbehaving|Temporary failure in name resolution|i\/o timeout)/.exec(raw);
  if (m?.[1] !== undefined) return { key: 'dns', where: m[1] };
  m = /UnknownHostException:\s*([^\s:]+)/.exec(raw);
  if (m?.[1] !== undefined) return { key: 'dns', where: m[1] };
  m = /could not translate host name "([^"]+)"/.exec(raw) ?? /Failed to resolve '([^']+)'/.exec(raw) ?? /Could not resolve host: ([^\s;,]+)/.exec(raw);
  if (m?.[1] !== undefined) return { key: 'dns', where: m[1] };
  m = /\b(?:ENOTFOUND|EAI_AGAIN)\s+([^\s,;)'"]+)/.exec(raw);
  if (m?.[1] !== undefined) return { key: 'dns', where: m[1] };
  if (/Name or service not known|Temporary failure in name resolution|No address associated with hostname|nodename nor servname provided|\bENOTFOUND\b|\bEAI_AGAIN\b|UnknownHostException|no such host/i.test(raw)) {
    return { key: 'dns', where: undefined };
  }
  return undefined;
}

/** Lines that name no address belong to a nearby event that does, if any: one failure often prints both. */
const NEARBY = 15;

function located(lines: readonly LogLine[], out: Findings, kind: 'refused' | 'dns'): void {
  const found: { i: number; where: string | undefined }[] = [];
  lines.forEach((line, i) => {
    if (ERROR_PROPERTY.test(line.text)) return;
    if (kind === 'refused' && !/refused/i.test(line.raw)) return;
    if (kind === 'dns' && !/ENOTFOUND|EAI_|lookup|UnknownHost|resolve|translate host|name resolution|service not known|no such host|nodename|No address associated/i.test(line.raw)) return;
    const next = lines.slice(i + 1, i + 3).map((l) => l.raw);
    const loc = kind === 'refused' ? refusedTarget(line.raw, next) : dnsTarget(line.raw);
    if (loc !== undefined) found.push({ i, where: loc.where });
  });
  const named = found.filter((f) => f.where !== undefined);
  for (const f of named) {
    const where = f.where ?? '';
    out.event(`${kind}:${where}`, f.i, () => (kind === 'refused' ? refusedIssue(where) : dnsIssue(where)));
  }
  for (const f of found) {
    if (f.where !== undefined) continue;
    const near = nearest(named, f.i);
    if (near?.where !== undefined && out.has(`${kind}:${near.where}`)) out.claim(`${kind}:${near.where}`, f.i);
    else out.event(`${kind}:?`, f.i, () => (kind === 'refused' ? refusedIssue(undefined) : dnsIssue(undefined)));
  }
}

/** The entry of `sorted` (ascending by line) closest to line `i`, if within NEARBY lines. */
function nearest<T extends { i: number }>(sorted: readonly T[], i: number): T | undefined {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid]?.i ?? 0) < i) lo = mid + 1;
    else hi = mid;
  }
  const candidates = [sorted[lo - 1], sorted[lo]].filter((c): c is T => c !== undefined && Math.abs(c.i - i) <= NEARBY);
  return candidates.sort((a, b) => Math.abs(a.i - i) - Math.abs(b.i - i))[0];
}

function refusedIssue(where: string | undefined): Omit<Issue, 'count' | 'example'> {
  if (where === undefined) {
    return {
      pattern: 'Connection refused',
      severity: 'error',
      hint: 'A service the app connects to refused the connection: check that it is running and that the host and port the app uses are right.',
    };
  }
  const local = LOCAL_HOSTS.test(hostOf(where));
  return {
    pattern: `Connection refused to ${where}`,
    severity: 'error',
    hint: local
      ? `Nothing listens on ${where} inside the app's container: point the app at the service's own address (for a database, its connection URL in the environment variables), not at localhost.`
      : `Nothing accepted connections at ${where}: check that the service there is running and that the host and port in the app's environment variables are right.`,
  };
}

function dnsIssue(where: string | undefined): Omit<Issue, 'count' | 'example'> {
  if (where === undefined) {
    return {
      pattern: 'DNS lookup failed',
      severity: 'error',
      hint: "A host name the app uses does not resolve from its container: check the host names in the app's environment variables.",
    };
  }
  return {
    pattern: `DNS lookup failed for ${where}`,
    severity: 'error',
    hint: `The host name ${where} does not resolve from the app's container: check its spelling in the app's environment variables, and that the service it names exists.`,
  };
}

// --- permission denied ----------------------------------------------------------------------

const DENIED = /\bEACCES\b|permission denied|AccessDeniedException/i;

interface Denied {
  key: string;
  issue: Omit<Issue, 'count' | 'example'>;
}

/**
 * The path ending right before the first `suffix` that follows one (a run of characters other
 * than white space, `:` and parentheses, from its first `/`). A scan back from each `suffix`:
 * the pattern `(\/[^\s:()]+) suffix` retried at every `/` of a long run is quadratic.
 */
function pathBefore(raw: string, suffix: string): string | undefined {
  for (let at = raw.indexOf(suffix); at !== -1; at = raw.indexOf(suffix, at + 1)) {
    let from = at;
    while (from > 0 && !/[\s:()]/.test(raw.charAt(from - 1))) from--;
    const slash = raw.indexOf('/', from);
    if (slash !== -1 && slash < at - 1) return raw.slice(slash, at);
  }
  return undefined;
}

function deniedOf(raw: string): Denied {
  const db = /permission denied for (table|relation|schema|database|sequence|function) "?([\w.]+)"?/i.exec(raw);
  if (db?.[1] !== undefined && db[2] !== undefined) {
    const what = `${db[1].toLowerCase()} ${db[2]}`;
    return {
      key: `db:${what}`,
      issue: { pattern: `Permission denied for ${what}`, severity: 'error', hint: `The database user the app connects as has no privilege on ${what}: grant it, or connect as the user that owns it.` },
    };
  }
  if (/listen EACCES|bind: permission denied|bind\(\) to .{0,500}Permission denied/i.test(raw)) {
    const port = portOf(raw);
    return {
      key: `port:${port ?? '?'}`,
      issue: {
        pattern: port === undefined ? 'Permission denied binding a port' : `Permission denied binding port ${port}`,
        severity: 'error',
        hint: `Ports below 1024 need root: have the app listen on the PORT variable Slipway sets${port === undefined ? '' : ` instead of ${port}`}, with the project's port above 1023.`,
      },
    };
  }
  const path =
    /(?:EACCES: permission denied,? \w+|Permission denied:|AccessDeniedException:?)\s*'?([^'\s]+)'?/i.exec(raw)?.[1] ??
    /(?:open|mkdir|stat|lstat|remove|create|chmod|chown|rename|unlink|exec|fork\/exec)\s+"?(\/[^\s":]+|\.\.?\/[^\s":]+)"?: permission denied/i.exec(raw)?.[1] ??
    /\(\) "([^"]+)" failed \(13: Permission denied\)/.exec(raw)?.[1] ??
    pathBefore(raw, ' (Permission denied)') ??
    /(?:^|\s)((?:\/|\.\/)[^\s:]+): (?:\d+: )?Permission denied/i.exec(raw)?.[1];
  if (path === undefined) {
    return {
      key: '?',
      issue: { pattern: 'Permission denied', severity: 'error', hint: "The app was denied access to a file or resource: check which user the image runs as and what it owns." },
    };
  }
  const exec = /\bexec\b|\.sh\b|sh: |bash: |exec format/i.test(raw) && !/open|mkdir|EACCES/i.test(raw);
  return {
    key: `path:${path}`,
    issue: {
      pattern: `Permission denied: ${path}`,
      severity: 'error',
      hint: exec
        ? `${path} cannot be run: make it executable (chmod +x in the Dockerfile, or commit it with the executable bit) and redeploy.`
        : `The app's user may not access ${path}: make that user own it in the image (chown in the Dockerfile) or write under a directory it owns.`,
    },
  };
}

function permissionDenied(lines: readonly LogLine[], out: Findings): void {
  lines.forEach((line, i) => {
    if (!DENIED.test(line.raw) || ERROR_PROPERTY.test(line.text)) return;
    const d = deniedOf(line.raw);
    out.event(`denied:${d.key}`, i, () => d.issue);
  });
}

// --- unhandled exceptions and panics ----------------------------------------------------------

interface Frame {
  file: string;
  line: string;
  fn: string | undefined;
  library: boolean;
}

interface ParsedTrace {
  lang: 'node' | 'python' | 'go' | 'java';
  /** the first line of the block (`Traceback …` for Python, the header otherwise) */
  start: number;
  header: number;
  end: number;
  type: string;
  message: string;
  frames: Frame[];
  fatal: boolean;
}

const NODE_HEADER = /^(?:Uncaught )?((?:[A-Z]\w*)?(?:Error|Exception))(?: \[([A-Z0-9_]+)\])?(?::\s?(.*))?$/;
const NODE_FRAME = /^\s+at (?:async )?(?:(.+?) \()?((?:[a-z]+:)?[^()\s]+?):(\d+):(\d+)\)?\s*$/;
const JAVA_HEADER = /^(?:Exception in thread "[^"]*" )?((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable))(?::\s*(.*))?$/;
const JAVA_FRAME = /^\s+at ([\w$.<>/-]+)\(([^)]*)\)/;
const JAVA_LIBRARY = /^(?:java|javax|jdk|sun|com\.sun|kotlin|kotlinx|scala|org\.springframework|org\.apache|io\.netty|org\.hibernate|com\.zaxxer|org\.eclipse|io\.undertow|reactor|io\.micronaut|io\.quarkus)\./;
const PY_FRAME = /^\s+File "([^"]+)", line (\d+)(?:, in (.+))?$/;
const PY_LIBRARY = /site-packages\/|dist-packages\/|\/lib\/python\d|^<frozen |^<string>/;
const GO_LIBRARY = /\/usr\/local\/go\/src\/|\/go\/pkg\/mod\/|\/vendor\/|\/runtime\/|^\/usr\/lib\/go/;

function nodeTrace(lines: readonly LogLine[], i: number): ParsedTrace | undefined {
  const header = NODE_HEADER.exec(lines[i]?.text ?? '');
  if (header === null) return undefined;
  // the message may run over a few lines before the first frame
  let j = i + 1;
  while (j < lines.length && j <= i + 4 && !NODE_FRAME.test(lines[j]?.text ?? '')) j++;
  if (!NODE_FRAME.test(lines[j]?.text ?? '')) return undefined;
  const frames: Frame[] = [];
  for (; j < lines.length; j++) {
    const m = NODE_FRAME.exec(lines[j]?.text ?? '');
    if (m === null) {
      if (/^\s+at /.test(lines[j]?.text ?? '')) continue;
      break;
    }
    const file = (m[2] ?? '').replace(/^file:\/\//, '');
    frames.push({ file, line: m[3] ?? '', fn: m[1], library: /^node:|^internal\/|node_modules\/|^<anonymous>$|^native$/.test(file) });
  }
  const end = j - 1;
  const before = lines.slice(Math.max(0, i - 6), i).map((l) => l.text);
  const after = lines.slice(end + 1, end + 16).map((l) => l.text);
  const fatal =
    /^Uncaught /.test(lines[i]?.text ?? '') ||
    before.some((t) => /^\s*\^+\s*$|unhandledRejection|UnhandledPromiseRejection|uncaughtException/i.test(t)) ||
    after.some((t) => /^Node\.js v\d+/.test(t));
  return { lang: 'node', start: i, header: i, end, type: header[1] ?? 'Error', message: header[3] ?? '', frames, fatal };
}

function javaTrace(lines: readonly LogLine[], i: number): ParsedTrace | undefined {
  const text = lines[i]?.text ?? '';
  const header = JAVA_HEADER.exec(text);
  if (header === null || !JAVA_FRAME.test(lines[i + 1]?.text ?? '')) return undefined;
  const frames: Frame[] = [];
  let j = i + 1;
  for (; j < lines.length; j++) {
    const t = lines[j]?.text ?? '';
    const m = JAVA_FRAME.exec(t);
    if (m !== null) {
      const method = (m[1] ?? '').replace(/^[\w.-]*\//, '');
      const loc = /^([^:]+):(\d+)$/.exec(m[2] ?? '');
      frames.push({ file: loc?.[1] ?? m[2] ?? '', line: loc?.[2] ?? '', fn: method, library: JAVA_LIBRARY.test(method) || loc === null });
      continue;
    }
    if (/^\s+\.\.\. \d+ (?:more|common frames omitted)/.test(t) || /^\s*(?:Caused by|Suppressed): /.test(t)) continue;
    break;
  }
  return { lang: 'java', start: i, header: i, end: j - 1, type: header[1] ?? 'Exception', message: header[2] ?? '', frames, fatal: text.startsWith('Exception in thread ') };
}

function pythonTrace(lines: readonly LogLine[], i: number): ParsedTrace | undefined {
  if (!/^Traceback \(most recent call last\):/.test(lines[i]?.text ?? '')) return undefined;
  const frames: Frame[] = [];
  let j = i + 1;
  for (; j < lines.length; j++) {
    const t = lines[j]?.text ?? '';
    const m = PY_FRAME.exec(t);
    if (m !== null) {
      const file = m[1] ?? '';
      frames.push({ file, line: m[2] ?? '', fn: m[3], library: PY_LIBRARY.test(file) });
      continue;
    }
    if (/^\s/.test(t) || t === '') continue;
    break;
  }
  const last = lines[j]?.text ?? '';
  const m = /^([A-Za-z_][\w.]*)(?::\s?(.*))?$/.exec(last);
  if (m === null) return undefined;
  // most recent call last: the innermost frame of the app is the last one
  frames.reverse();
  const prev = lines.slice(Math.max(0, i - 3), i).reverse().find((l) => l.text.trim() !== '');
  const logged = prev !== undefined && (prev.level === 'error' || prev.level === 'fatal' || /exception|error/i.test(prev.text)) && !PY_FRAME.test(prev.text);
  return { lang: 'python', start: i, header: j, end: j, type: m[1] ?? 'Exception', message: m[2] ?? '', frames, fatal: !logged };
}

function goTrace(lines: readonly LogLine[], i: number): ParsedTrace | undefined {
  const header = /^(panic|fatal error): (.*)$/.exec(lines[i]?.text ?? '');
  if (header === null) return undefined;
  let j = i + 1;
  while (j < lines.length && j <= i + 6 && !/^goroutine \d+ \[/.test(lines[j]?.text ?? '')) j++;
  if (!/^goroutine \d+ \[/.test(lines[j]?.text ?? '')) return { lang: 'go', start: i, header: i, end: i, type: header[1] ?? 'panic', message: header[2] ?? '', frames: [], fatal: true };
  const frames: Frame[] = [];
  let fn: string | undefined;
  for (j++; j < lines.length; j++) {
    const t = lines[j]?.text ?? '';
    const file = /^\s+(\S+\.go):(\d+)(?: \+0x[0-9a-f]+)?$/.exec(t);
    if (file !== null) {
      const path = file[1] ?? '';
      frames.push({ file: path, line: file[2] ?? '', fn, library: GO_LIBRARY.test(path) || (fn?.startsWith('runtime.') ?? false) });
      fn = undefined;
      continue;
    }
    if (/^\S.*\)$/.test(t) || /^created by /.test(t)) {
      fn = t.replace(/^created by /, '').replace(/ in goroutine \d+$/, '').replace(/\([^()]*\)$/, '');
      continue;
    }
    if (t === '' && /^goroutine \d+ \[/.test(lines[j + 1]?.text ?? '')) break;
    if (/^exit status \d+/.test(t)) {
      j++;
      break;
    }
    if (t !== '' && !/^\s/.test(t)) break;
  }
  return { lang: 'go', start: i, header: i, end: j - 1, type: header[1] ?? 'panic', message: header[2] ?? '', frames, fatal: true };
}

function traceIssue(t: ParsedTrace): Omit<Issue, 'count' | 'example'> & { key: string } {
  const app = t.frames.find((f) => !f.library);
  const frame = app ?? t.frames[0];
  const at = frame === undefined ? undefined : `${frame.file}${frame.line === '' ? '' : `:${frame.line}`}${frame.fn === undefined || frame.fn === '' ? '' : ` in ${frame.fn}`}`;
  const message = clip(t.message.trim(), MAX_DETAIL);
  const what = t.lang === 'go' ? (t.type === 'panic' ? 'The app panics' : 'The Go runtime stops the app') : `${t.fatal ? 'An uncaught' : /^[AEIOU]/.test(t.type) ? 'An' : 'A'} ${t.type}${message === '' ? '' : ` ("${message}")`} is thrown`;
  const detail = t.lang === 'go' && message !== '' ? ` (${message})` : '';
  let hint: string;
  const fix = t.lang === 'go' ? 'fix it' : t.fatal ? 'fix or catch it' : 'fix its cause';
  if (app !== undefined && at !== undefined) hint = `${what} at ${at}${detail}: ${fix} there, then redeploy.`;
  else if (at !== undefined) hint = `${what} inside library code (first frame ${at})${detail}: check how the app calls into it.`;
  else hint = `${what}${detail}, without a stack trace: look for what the app did just before.`;
  // without a frame, the message tells one failure from another
  const masked = clip(maskTokens(t.message).join(' '), MAX_DETAIL);
  return {
    key: `trace:${t.lang}:${t.type}:${at ?? `: ${masked}`}`,
    pattern: at === undefined ? `${t.type}: ${masked}` : `${t.type} at ${at}`,
    severity: t.fatal ? 'critical' : 'error',
    hint,
  };
}

function parseTraces(lines: readonly LogLine[]): ParsedTrace[] {
  const traces: ParsedTrace[] = [];
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i]?.text ?? '';
    if (!/Error|Exception|Throwable|Traceback|panic: |fatal error: /.test(text)) continue;
    const t = pythonTrace(lines, i) ?? goTrace(lines, i) ?? javaTrace(lines, i) ?? nodeTrace(lines, i);
    if (t === undefined) continue;
    traces.push(t);
    // a Python trace's header is its last line; the block starts at `Traceback`
    i = Math.max(i, t.end);
  }
  return traces;
}

function exceptions(lines: readonly LogLine[], out: Findings, traces: readonly ParsedTrace[]): void {
  for (const t of traces) {
    const start = t.start;
    const block = Array.from({ length: t.end - start + 1 }, (_, k) => start + k);
    // the error the app logged with the trace (`logger.exception("…")`) is the same event
    const intro = lines[start - 1];
    if (intro !== undefined && (intro.level === 'error' || intro.level === 'fatal') && !out.claimed.has(start - 1)) block.unshift(start - 1);
    // a trace whose exception a specific signature explains belongs to that issue
    const owner = out.owner(t.header);
    if (owner !== undefined) {
      for (const k of block) out.claim(owner.key, k);
      continue;
    }
    const { key, ...issue } = traceIssue(t);
    out.event(key, t.header, () => issue);
    for (const k of block) out.claim(key, k);
  }
}

// --- crash loop -----------------------------------------------------------------------------

const STARTUP = /\b(?:listening on|listening at|server (?:is )?(?:running|listening|started)|started server|starting (?:server|app|application|up|worker)|booting (?:worker|server)|uvicorn running|running on https?:|started \w+ in [\d.]+ ?s|application startup complete|server ready|ready on|ready in)\b|^> (?=\S+@\S)\S+ start\b/i;
const EXIT = /exited with code [1-9]|\bexit (?:code|status) [1-9]|process exited(?! with code 0)|Process finished with exit code [1-9]|npm ERR! code ELIFECYCLE|error Command failed with exit code|^Killed$|Segmentation fault|core dumped|^Aborted\b|^Node\.js v\d+/i;

function crashLoop(lines: readonly LogLine[], out: Findings, traces: readonly ParsedTrace[], templateOf: (i: number) => number | undefined): void {
  const startsByTemplate = new Map<number, number[]>();
  lines.forEach((line, i) => {
    if (!STARTUP.test(line.text)) return;
    const id = templateOf(i);
    if (id === undefined) return;
    const list = startsByTemplate.get(id) ?? [];
    list.push(i);
    startsByTemplate.set(id, list);
  });
  let starts: number[] = [];
  for (const list of startsByTemplate.values()) if (list.length > starts.length || (list.length === starts.length && (list[0] ?? 0) < (starts[0] ?? 0))) starts = list;
  if (starts.length < 3) return;

  const crashes = new Set<number>();
  lines.forEach((line, i) => {
    if (line.level === 'fatal' || EXIT.test(line.text)) crashes.add(i);
  });
  for (const t of traces) if (t.fatal) crashes.add(t.header);
  for (const f of out.all()) if (f.severity === 'critical') for (const k of f.lines) crashes.add(k);

  let crashed = 0;
  let firstCrash: number | undefined;
  let firstStart: number | undefined;
  for (let s = 0; s < starts.length; s++) {
    const from = starts[s] ?? 0;
    const to = starts[s + 1] ?? lines.length;
    let hit: number | undefined;
    for (let k = from + 1; k < to; k++) {
      if (crashes.has(k)) {
        hit = k;
        break;
      }
    }
    if (hit === undefined) continue;
    crashed++;
    if (firstCrash === undefined) {
      firstCrash = hit;
      firstStart = from;
    }
  }
  if (crashed < 2) return;

  // the cause is the first named issue between the start and the crash, else the crash itself
  let cause: Finding | undefined;
  for (let k = (firstStart ?? 0) + 1; firstCrash !== undefined && k <= firstCrash && cause === undefined; k++) cause = out.owner(k)?.finding;
  const crashLine = firstCrash === undefined ? undefined : lines[firstCrash];
  const first = starts[0] ?? 0;
  const hint =
    cause !== undefined
      ? `The app stops soon after each start, first with "${clip(cause.pattern, MAX_DETAIL)}": fix that (see its own hint) and redeploy.`
      : `The app stops soon after each start: fix the first error after its start line${crashLine === undefined ? '' : ` ("${clip(crashLine.text.trim(), MAX_DETAIL)}")`} and redeploy.`;
  const f = out.event('crash-loop', first, () => ({ pattern: 'Crash loop: the app keeps restarting', severity: 'critical', hint }));
  f.count = starts.length;
  for (const k of starts) out.claim('crash-loop', k);
  // the exits themselves are the loop, not errors of their own
  for (const k of crashes) if (!out.claimed.has(k) && EXIT.test(lines[k]?.text ?? '')) out.claim('crash-loop', k);
}

// --- all together ---------------------------------------------------------------------------

/**
 * Runs every recognizer over the lines. `templateOf` maps a line to its template's id (the crash
 * loop looks for a start line that repeats).
 */
export function recognize(lines: readonly LogLine[], templateOf: (i: number) => number | undefined): SignatureResult {
  const out = new Findings(lines);
  outOfMemory(lines, out);
  portInUse(lines, out);
  missingEnv(lines, out);
  located(lines, out, 'refused');
  located(lines, out, 'dns');
  permissionDenied(lines, out);
  const traces = parseTraces(lines);
  exceptions(lines, out, traces);
  crashLoop(lines, out, traces, templateOf);
  return { findings: out.all(), claimed: out.claimed, traces: traces.map((t) => ({ start: t.start, header: t.header, end: t.end })) };
}
