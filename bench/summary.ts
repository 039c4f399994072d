// The latest result of each whole-platform benchmark, each figure beside its goal (issue 28):
// deploy latency, memory with everything on (and the status, health and metrics reads measured
// in that run), the API's hot path and the sampler's writes over 2,000 resources. `make bench-all`
// runs the four benches and then this; on its own it summarises what bench/results/ holds.
//
//   npx tsx bench/summary.ts
//
// Prints a table (the README's performance table is copied from it) and writes
// bench/results/summary-<date>.json.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { writeResult } from './support.js';

const DIR = fileURLToPath(new URL('./results/', import.meta.url));

/** The newest `<name>-<date>.json` (not a `-before-…` snapshot), parsed, with its file name. */
function latest(name: string): { file: string; data: Record<string, unknown> } | null {
  const files = readdirSync(DIR)
    .filter((f) => new RegExp(`^${name}-\\d{4}-\\d{2}-\\d{2}\\.json$`).test(f))
    .sort();
  const file = files.at(-1);
  return file === undefined ? null : { file, data: JSON.parse(readFileSync(`${DIR}${file}`, 'utf8')) as Record<string, unknown> };
}

interface Row {
  what: string;
  figure: string;
  goal: string;
  met: boolean | null;
  source: string;
}

const at = (o: unknown, ...path: string[]): unknown => path.reduce<unknown>((v, k) => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[k] : undefined), o);
const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);

const rows: Row[] = [];
const deploy = latest('deploy');
if (deploy !== null) {
  const r = deploy.data['results'];
  const same = num(at(r, 'ratio_of_medians'));
  const net = num(at(r, 'ratio_vs_plain_on_a_network'));
  const dflt = num(at(r, 'ratio_vs_default_docker_build'));
  rows.push({ what: 'Deploy latency vs plain docker build + run, same builder (BuildKit)', figure: `${String(same)}× (${String(at(r, 'slipway_ms', 'median'))} vs ${String(at(r, 'plain_ms', 'median'))} ms)`, goal: '≤ 1.2×', met: same === null ? null : same <= 1.2, source: deploy.file });
  if (net !== null) rows.push({ what: '… the plain container on a user-defined network, as Slipway\'s are', figure: `${String(net)}× (plain ${String(at(r, 'plain_on_a_network_ms', 'median'))} ms)`, goal: '≤ 1.2×', met: net <= 1.2, source: deploy.file });
  if (dflt !== null) rows.push({ what: '… vs `docker build` as this machine runs it (legacy builder)', figure: `${String(dflt)}×`, goal: '≤ 1.2×', met: dflt <= 1.2, source: deploy.file });
}
const memory = latest('idle-memory');
if (memory !== null) {
  const e = at(memory.data['results'], 'everything_on');
  for (const [when, key] of [['in use', 'in_use'], ['after a restart', 'after_restart']] as const) {
    const median = num(at(e, key, 'slipway_rss_mib', 'median'));
    const max = num(at(e, key, 'slipway_rss_mib', 'max'));
    if (median !== null && max !== null) rows.push({ what: `Control plane RSS, 10 projects + 3 databases + 10 monitors, ${when}`, figure: `${String(median)} MiB (max ${String(max)})`, goal: '≤ 120 MiB', met: max <= 120, source: memory.file });
  }
  const reads = at(e, 'reads_ms');
  if (typeof reads === 'object' && reads !== null) {
    for (const [kind, v] of Object.entries(reads)) {
      const p99 = num(at(v, 'p99'));
      if (p99 !== null) rows.push({ what: `GET ${kind.replace('_', ' ')}, p99`, figure: `${String(p99)} ms`, goal: '≤ 20 ms', met: p99 <= 20, source: memory.file });
    }
  }
}
const api = latest('api');
if (api !== null && Array.isArray(api.data['verdicts'])) {
  for (const v of api.data['verdicts'] as Record<string, unknown>[]) {
    const ratio = num(v['ratio']);
    rows.push({ what: `API hot path vs a minimal handler (${String(v['store'])})`, figure: `${String(ratio)}, p99 ${String(v['slipway_p99_ms'])} ms`, goal: '≥ 0.8', met: ratio === null ? null : ratio >= 0.8, source: api.file });
  }
}
const writes = latest('writes');
if (writes !== null) {
  for (const [store, r] of Object.entries(writes.data['results'] as Record<string, unknown>)) {
    const median = num(at(r, 'batched_ms', 'median'));
    const max = num(at(r, 'batched_ms', 'max'));
    rows.push({ what: `Sampler pass over 2,000 resources (${store})`, figure: `${String(median)} ms (max ${String(max)}; one by one ${String(at(r, 'one_by_one_ms', 'median'))} ms)`, goal: '≤ 1,000 ms', met: max === null ? null : max <= 1000, source: writes.file });
  }
}

const mark = (m: boolean | null) => (m === null ? '?' : m ? 'met' : 'NOT met');
for (const r of rows) console.log(`${r.what.padEnd(78)} ${r.figure.padEnd(44)} goal ${r.goal.padEnd(10)} ${mark(r.met)}`);
const report = { date: new Date().toISOString(), rows };
const file = writeResult('summary', report);
console.log(`written to ${file}`);
