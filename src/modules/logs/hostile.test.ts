// The analyzer's cost is linear in its input, whatever the input (issue 26, item 1): random
// punctuation-heavy text with long runs and long tokens, and the shapes known to have been
// super-linear, are analysed, redacted and prepared for the model within a bound per byte.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { inspect } from './analyzer.js';
import { buildPayload } from './llm.js';
import { redact } from './redact.js';
import { MAX_TOKEN, maskTokens } from './templates.js';

/** Microseconds per byte the whole pass may take: ordinary logs take about 0.5 here. */
const BOUND_US_PER_BYTE = 5;
/** fixed cost of a pass, whatever its size (allocation, a collection) */
const SLACK_MS = 15;

/** The built-in analysis and the model's preparation (templates, redaction), as a request runs them. */
function pass(text: string): void {
  const inspection = inspect(text);
  buildPayload(inspection, ['hunter2-secret']);
  redact(text.slice(0, 64 * 1024), ['hunter2-secret']);
}

/** The faster of two timings, in ms: one run may meet a garbage collection or a busy core. */
function timed(text: string): number {
  let best = Number.POSITIVE_INFINITY;
  for (let k = 0; k < 2; k++) {
    const t = performance.now();
    pass(text);
    best = Math.min(best, performance.now() - t);
  }
  return best;
}

function expectLinear(text: string): void {
  const ms = timed(text);
  const bytes = Buffer.byteLength(text, 'utf8');
  const limit = (bytes * BOUND_US_PER_BYTE) / 1000 + SLACK_MS;
  expect(ms, `${String(bytes)} bytes took ${ms.toFixed(1)} ms (limit ${limit.toFixed(1)} ms): ${JSON.stringify(text.slice(0, 80))}…`).toBeLessThan(limit);
}

const PUNCTUATION = Array.from(',.;:!?()[]{}<>"\'`\\/-_=+*&^%$#@|~');
const OTHER = Array.from('aZ09 :x\t');

/** A run of one character: the shape that made the token pattern quadratic. */
const run = fc.tuple(fc.constantFrom(...PUNCTUATION, ...PUNCTUATION, ...OTHER), fc.integer({ min: 1, max: 9000 })).map(([c, n]) => c.repeat(n));
/** A short mix of anything. */
const mix = fc.string({ unit: fc.constantFrom(...PUNCTUATION, ...OTHER, 'ERROR ', 'ECONNREFUSED ', 'Out of memory: Killed process 1 (', ' msg="', 'http://a:', 'permission denied'), maxLength: 40 });
const line = fc.array(fc.oneof(run, mix), { minLength: 1, maxLength: 8 }).map((parts) => parts.join(''));
const text = fc.array(line, { minLength: 1, maxLength: 12 }).map((lines) => lines.join('\n')).filter((t) => t.length >= 16 * 1024);

describe('the analyzer on hostile input', () => {
  it('masks one long punctuation token in time linear in its length, and caps the token', () => {
    const token = `a${','.repeat(8190)}a`;
    const t = performance.now();
    const tokens = maskTokens(token);
    expect(performance.now() - t).toBeLessThan(5);
    expect(tokens).toEqual(['<*>']);
    // a short one keeps its shape
    expect(maskTokens('(status=500),')).toEqual(['(status=<*>),']);
    expect(MAX_TOKEN).toBeLessThanOrEqual(256);
  });

  it("answers the issue's body (120 lines of a, 8,190 commas and a) within the bound per byte", () => {
    expectLinear(Array.from({ length: 120 }, () => `a${','.repeat(8190)}a`).join('\n'));
  });

  it('stays within the bound per byte on the shapes that were super-linear', () => {
    const shapes = [
      // quoted values: escaped quotes re-opened at every one
      `"${'\\"'.repeat(4000)}`,
      // the IPv6 mask's overlapping groups
      `${':'.repeat(8000)}!`,
      `${'a:'.repeat(4000)}!`,
      // a connection target's trailing punctuation and leading brackets
      `ECONNREFUSED ${'('.repeat(4000)}]${')'.repeat(4000)}x`,
      `Error: connect ECONNREFUSED ${','.repeat(8000)}x`,
      // the kernel's OOM line, repeated without its closing parenthesis
      'Out of memory: Killed process 1 ('.repeat(240),
      // redaction's named values and long runs
      `password=${'"'.repeat(8000)}`,
      'password'.repeat(1000),
      `Bearer ${'a'.repeat(8000)}`,
      `${'-'.repeat(8000)}BEGIN`,
      `http://${'a'.repeat(8000)}:`,
      // exceptions and frames
      `${'a.'.repeat(4000)}Error`,
      `    at ${'('.repeat(4000)}x`,
      `    at ${'a '.repeat(4000)}(`,
      `missing ${'env '.repeat(2000)}`,
      `${' '.repeat(8000)}is not set`,
      `${'A'.repeat(8000)}Error: x`,
    ];
    for (const shape of shapes) expectLinear(Array.from({ length: 8 }, () => shape).join('\n'));
  });

  it('stays within the bound per byte on random punctuation-heavy text with long runs', () => {
    fc.assert(
      fc.property(text, (t) => {
        expectLinear(t);
      }),
      { numRuns: 25, seed: 26 },
    );
  });
});
