// The resource sampler's writes past a few thousand resources (issue 28): one minute's rows for
// 2,000 resources (projects and databases), written through MetricsRepository.put() as the sampler
// does (batched upserts), beside the same rows one upsert at a time (the put() before the batching)
// and, on SQLite, beside the least such a pass can write: hand-written better-sqlite3 prepared
// upserts in one transaction. Each pass runs twice per round (the first minute inserts, the
// second updates the same rows, as the sampler's six passes a minute do), on SQLite and on PostgreSQL.
//
//   npx tsx bench/writes.bench.ts [--resources 2000] [--rounds 5] [--pg-url postgres://…]   (make bench-writes)
//
// Writes bench/results/writes-<date>.json. Not part of the test suite.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createStore, type Store } from '../src/store/db.js';
import type { MetricsMinute } from '../src/store/repositories/index.js';
import { arg, freshPostgres, machine, round, summary, writeResult } from './support.js';

const RESOURCES = Number(arg('resources', '2000'));
const ROUNDS = Number(arg('rounds', '5'));
const PG_URL = arg('pg-url', process.env['SLIPWAY_TEST_PG_URL'] ?? '');
/** a sampler pass that takes longer than this would crowd its own 10 s period */
const GOAL_MS = 1000;

function rowsOf(minute: string, seed: number): MetricsMinute[] {
  return Array.from({ length: RESOURCES }, (_, i) => ({
    resource_id: `res-${String(i).padStart(5, '0')}`,
    minute,
    cpu_millicores: (i * 7 + seed) % 2000,
    memory_bytes: 1_000_000 + i * 4096 + seed,
    memory_limit_bytes: 536_870_912,
    rx_bytes: i * 100 + seed,
    tx_bytes: i * 50 + seed,
    samples: 1 + (seed % 6),
  }));
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** ms per pass, batched (put) and one row at a time, over ROUNDS rounds of an insert pass and an update pass. */
async function throughRepository(store: Store): Promise<{ batched_ms: ReturnType<typeof summary>; one_by_one_ms: ReturnType<typeof summary> }> {
  const batched: number[] = [];
  const oneByOne: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const minute = `2026-01-01T00:${String(r * 2).padStart(2, '0')}:00.000Z`;
    for (const seed of [1, 2]) batched.push(await timed(() => store.repos.metrics.put(rowsOf(minute, seed))));
    const other = `2026-01-01T01:${String(r * 2).padStart(2, '0')}:00.000Z`;
    for (const seed of [1, 2]) {
      oneByOne.push(
        await timed(async () => {
          for (const row of rowsOf(other, seed)) await store.repos.metrics.put([row]);
        }),
      );
    }
  }
  return { batched_ms: summary(batched), one_by_one_ms: summary(oneByOne) };
}

function reference(file: string): ReturnType<typeof summary> {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const upsert = db.prepare(
    `INSERT INTO resource_metrics (resource_id, minute, cpu_millicores, memory_bytes, memory_limit_bytes, rx_bytes, tx_bytes, samples)
     VALUES (@resource_id, @minute, @cpu_millicores, @memory_bytes, @memory_limit_bytes, @rx_bytes, @tx_bytes, @samples)
     ON CONFLICT (resource_id, minute) DO UPDATE SET cpu_millicores = excluded.cpu_millicores, memory_bytes = excluded.memory_bytes,
       memory_limit_bytes = excluded.memory_limit_bytes, rx_bytes = excluded.rx_bytes, tx_bytes = excluded.tx_bytes, samples = excluded.samples`,
  );
  const pass = db.transaction((rows: MetricsMinute[]) => {
    for (const row of rows) upsert.run(row);
  });
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const minute = `2026-01-01T02:${String(r * 2).padStart(2, '0')}:00.000Z`;
    for (const seed of [1, 2]) {
      const rows = rowsOf(minute, seed);
      const t0 = performance.now();
      pass(rows);
      times.push(performance.now() - t0);
    }
  }
  db.close();
  return summary(times);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'slipway-writes-'));
  const results: Record<string, unknown> = {};
  try {
    const file = join(dir, 'slipway.db');
    const sqlite = await createStore(file);
    try {
      results['sqlite'] = await throughRepository(sqlite);
    } finally {
      await sqlite.close();
    }
    (results['sqlite'] as Record<string, unknown>)['reference_one_transaction_ms'] = reference(file);
    console.log(`sqlite: ${JSON.stringify(results['sqlite'])}`);
    if (PG_URL !== '') {
      const pg = await freshPostgres(PG_URL);
      try {
        const store = await createStore(pg.url);
        try {
          results['postgres'] = await throughRepository(store);
        } finally {
          await store.close();
        }
      } finally {
        await pg.drop();
      }
      console.log(`postgres: ${JSON.stringify(results['postgres'])}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const medians = Object.entries(results).map(([store, r]) => [store, (r as { batched_ms: { median: number; max: number } }).batched_ms] as const);
  const met = medians.every(([, m]) => m.max <= GOAL_MS);
  const report = {
    date: new Date().toISOString(),
    machine: await machine(),
    settings: { resources: RESOURCES, rounds: ROUNDS, passes_per_round: 'an insert pass and an update pass of the same rows', row: 'one resource_metrics minute (8 values)' },
    results,
    goal: { sampler_pass_ms: `<= ${String(GOAL_MS)} (max of the batched passes)`, met },
  };
  const file = writeResult('writes', report);
  for (const [store, m] of medians) console.log(`${store}: a sampler pass over ${String(RESOURCES)} resources, median ${String(round(m.median, 1))} ms (max ${String(round(m.max, 1))}; goal <= ${String(GOAL_MS)})`);
  console.log(`written to ${file}`);
}

await main();
