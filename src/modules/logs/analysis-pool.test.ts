// The analysis worker pool, with its worker thread loaded from the TypeScript sources: the same
// answers as the analyzer in this thread, the budget, the bounded queue, and closing.
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../../domain/errors.js';
import { analyze } from './analyzer.js';
import { AnalysisPool } from './analysis-pool.js';
import { prepare } from './llm.js';

const CRASH = [
  'Server starting on port 8080',
  "TypeError: Cannot read properties of undefined (reading 'id')",
  '    at handler (/app/src/routes/users.js:42:17)',
  'connecting with password hunter2-secret',
  'Error: connect ECONNREFUSED 10.0.0.5:5432',
].join('\n');
/** About 1 MB that takes the analyzer a few hundred milliseconds. */
const LARGE = Array.from({ length: 10_000 }, (_, i) => `ERROR request ${String(i)} to /api/users/${String(i)} failed after ${String(i % 300)}ms from 10.0.${String(i % 255)}.${String(i % 7)}`).join('\n');

let pool: AnalysisPool | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

describe('AnalysisPool', () => {
  it('answers what the analyzer answers in this thread, for text and for lines, and prepares the same request', async () => {
    pool = new AnalysisPool();
    expect(await pool.analyze(CRASH)).toEqual(analyze(CRASH));
    expect(await pool.analyze(CRASH.split('\n'))).toEqual(analyze(CRASH.split('\n')));
    const prepared = await pool.prepare(CRASH, ['hunter2-secret']);
    expect(prepared).toEqual(prepare(CRASH, ['hunter2-secret']));
    expect(JSON.stringify(prepared.payload)).not.toContain('hunter2-secret');
  });

  it('stops an analysis past its budget with a 422 that names it, and analyses again with a fresh worker', async () => {
    // four times LARGE takes 450 ms or more; the small analysis after it, in a fresh (cold)
    // worker, 5-15 ms on an idle machine: the budget sits far from both, also under load (at
    // 20 ms it failed about one run in five on a loaded machine, on the small one)
    pool = new AnalysisPool({ timeoutMs: 150 });
    const err: unknown = await pool.analyze([LARGE, LARGE, LARGE, LARGE].join('\n')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).status).toBe(422);
    expect((err as AppError).message).toBe('The analysis of these logs took longer than its budget of 0.15 s and was stopped: send fewer or shorter lines.');
    expect((await pool.analyze('ERROR: listen EADDRINUSE: address already in use :::3000')).issues[0]?.hint).toContain('3000');
  });

  it('queues up to its bound behind a busy worker and refuses past it with a 503 and Retry-After', async () => {
    pool = new AnalysisPool({ workers: 1, queue: 1, timeoutMs: 10_000 });
    await pool.analyze('warm');
    const running = [pool.analyze(LARGE), pool.analyze(CRASH)];
    const refused: unknown = await pool.analyze(CRASH).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).status).toBe(503);
    expect((refused as AppError).headers).toEqual({ 'retry-after': '10' });
    const [large, crash] = await Promise.all(running);
    expect(large?.issues.length).toBeGreaterThan(0);
    expect(crash).toEqual(analyze(CRASH));
  });

  it('refuses new and waiting work once closed', async () => {
    pool = new AnalysisPool({ workers: 1, queue: 1 });
    const first = pool.analyze(LARGE).catch((e: unknown) => e);
    const waiting = pool.analyze(CRASH).catch((e: unknown) => e);
    await pool.close();
    expect(await waiting).toBeInstanceOf(AppError);
    expect(await first).toBeInstanceOf(AppError);
    expect(await pool.analyze(CRASH).catch((e: unknown) => (e as AppError).status)).toBe(503);
  });
});
